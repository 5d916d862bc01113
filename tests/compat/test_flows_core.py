"""The stock Core API (determined==0.38.1) inside real trials: what reaches the master over REST."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import MasterProcess, create_experiment, wait_for

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


def _run(client, det_env, **kw) -> tuple[int, dict]:
    exp = create_experiment(client, f.steps_config(det_env.python, **kw), f.STEPS_DIR)
    exp_id = exp["experiment"]["id"]
    return exp_id, f.only_trial(client, exp_id)


def test_metrics_and_checkpoints_reach_the_master(det_env, master: MasterProcess) -> None:
    client = master.admin()
    # Keep both checkpoints (the default GC policy would delete the one at 5, not the best).
    exp_id, t = _run(client, det_env, name="core-metrics", length=10, hparams={"x": 2},
                     checkpoint_storage={"save_trial_latest": 2})
    assert f.wait_state(client, exp_id, TERMINAL, timeout=60) == "STATE_COMPLETED"
    tid = t["id"]

    work = f.workloads(client, tid)
    training = {w["training"]["totalBatches"]: w["training"]["metrics"]["avgMetrics"]
                for w in work if "training" in w}
    assert sorted(training) == list(range(1, 11))
    for step, metrics in training.items():
        assert metrics == pytest.approx({"loss": 1.0 / step, "step": float(step)})
    validation = {w["validation"]["totalBatches"]: w["validation"]["metrics"]["avgMetrics"]
                  for w in work if "validation" in w}
    assert validation == {5: pytest.approx({"vloss": 0.4}), 10: pytest.approx({"vloss": 0.2})}

    done = f.trial(client, tid)
    assert done["state"] == "STATE_COMPLETED"
    assert done["totalBatchesProcessed"] == 10
    assert done["searcherMetricValue"] == pytest.approx(0.2)
    assert done["hparams"] == {"x": 2, "every": 5, "sleep": 0.02}

    ckpts = f.checkpoints(client, tid)
    assert sorted(c["metadata"]["steps_completed"] for c in ckpts) == [5, 10]
    for c in ckpts:
        assert c["state"] == "STATE_COMPLETED"
        assert c["training"]["trialId"] == tid and c["training"]["experimentId"] == exp_id
        # The stock client uploads into <host_path>/<uuid>/ and reports the files it wrote.
        state = f.ckpt_dir(master) / c["uuid"] / "state.json"
        assert json.loads(state.read_text()) == {"step": c["metadata"]["steps_completed"],
                                                 "trial_id": tid}
        assert "state.json" in c["resources"]
        assert c["resources"]["state.json"] == str(state.stat().st_size)
    assert f.steps_of(client, tid, "checkpoint") == [5, 10]


def test_report_progress_is_visible_while_running(det_env, master: MasterProcess, task_shared_dir: Path) -> None:
    client = master.admin()
    release = task_shared_dir / "release"  # the trial's account cannot enter tmp_path
    exp_id, t = _run(client, det_env, name="core-progress", length=5,
                     hparams={"mode": "progress", "release": str(release)})
    try:
        f.wait_log(client, t["id"], "PROGRESS-REPORTED")
        progress = wait_for(lambda: (p := f.experiment(client, exp_id).get("progress") or 0) > 0 and p,
                            timeout=5, what="experiment progress > 0")
        assert progress == pytest.approx(0.5)
    finally:
        release.touch()
    assert f.wait_state(client, exp_id, TERMINAL, timeout=60) == "STATE_COMPLETED"
    assert f.experiment(client, exp_id)["progress"] == pytest.approx(1.0)


def test_invalid_hp_exits_early_without_consuming_restarts(
    det_env, master: MasterProcess, task_shared_dir: Path
) -> None:
    """InvalidHP under the stock core: early_exit reported, exit 0, and random replaces the trial."""
    client = master.admin()
    marker = task_shared_dir / "invalid-once"
    exp = create_experiment(client, f.steps_config(
        det_env.python, name="core-invalid-hp", length=10,
        hparams={"mode": "invalid_hp", "marker": str(marker)},
        searcher={"name": "random", "max_trials": 1, "max_concurrent_trials": 1}, max_restarts=2,
    ), f.STEPS_DIR)
    exp_id = exp["experiment"]["id"]
    assert f.wait_state(client, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    first, second = sorted(f.trials(client, exp_id), key=lambda t: t["id"])
    assert marker.exists()
    for t in (first, second):
        assert (t["state"], t["restarts"]) == ("STATE_COMPLETED", 0), t
    text = f.log_text(client, first["id"])
    assert text.count("TRIAL-START") == 1, "an InvalidHP exit must not be retried"
    assert "RAISING-INVALID-HP" in text and "Traceback" not in text, text
    assert f.steps_of(client, first["id"], "training") == []
    # The searcher replaced the invalid trial (so the master got the early exit) and the
    # replacement ran to the end.
    assert f.steps_of(client, second["id"], "training") == list(range(1, 11))
