"""Two stock trials at once on the one embedded agent (2 slots), each with its own info files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat


def test_two_trials_run_concurrently_with_their_own_hparams(
    det_env, master: MasterProcess, task_shared_dir: Path
) -> None:
    client = master.admin()
    stamps = task_shared_dir / "stamps"  # the trials' account cannot enter tmp_path
    stamps.mkdir()
    stamps.chmod(0o1777)
    config = f.steps_config(
        det_env.python, name="concurrent", length=30,
        hparams={"x": {"type": "categorical", "vals": [1, 3]}, "sleep": 0.1, "stamp_dir": str(stamps)},
        searcher={"name": "grid", "max_concurrent_trials": 2},
    )
    exp_id = create_experiment(client, config, f.STEPS_DIR)["experiment"]["id"]
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                        timeout=90) == "STATE_COMPLETED"
    trials = f.trials(client, exp_id)
    assert len(trials) == 2
    assert sorted(t["hparams"]["x"] for t in trials) == [1, 3]

    windows = []
    for t in trials:
        assert t["state"] == "STATE_COMPLETED" and t["totalBatchesProcessed"] == 30
        # det.get_cluster_info() in each task read that task's own /run/determined/info files.
        stamp = json.loads((stamps / f"{t['id']}.json").read_text())
        assert stamp["trial_id"] == t["id"]
        assert stamp["hparams"] == t["hparams"]
        assert f"TRIAL-START trial={t['id']} hparams={json.dumps(t['hparams'], sort_keys=True)}" \
            in f.log_text(client, t["id"])
        # Validation uses this trial's x: vloss = x / 30 at the last step.
        assert t["searcherMetricValue"] == pytest.approx(t["hparams"]["x"] / 30)
        windows.append((stamp["start"], stamp["end"]))
    (s1, e1), (s2, e2) = windows
    assert max(s1, s2) < min(e1, e2), f"the trials ran one after the other: {windows}"
