"""``det_harness.core.track()``: a script (or notebook) run recorded into a real master as an
unmanaged experiment and trial, with the user's own token and no cluster task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import MasterProcess
from tests.conftest import backend_db_url
from tests.integration._exp import training_steps

_RUN = r"""
import json, os, sys
import det_harness as det

mode, storage = sys.argv[1], sys.argv[2]
external = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
project = int(sys.argv[4]) if len(sys.argv) > 4 else None
with det.core.track("tracked-run", hparams={"lr": 0.1, "layers": 2}, checkpoint_storage=storage,
                    labels=["notebook"], external_id=external, metric="val_loss",
                    project_id=project) as core:
    run = core.run
    start = run.steps_completed
    restored = None
    if run.latest_checkpoint:
        with core.checkpoint.restore_path(run.latest_checkpoint) as path:
            restored = json.loads(open(os.path.join(path, "state.json")).read())
    for step in range(start + 1, start + 11):
        core.train.report_training_metrics(step, {"loss": 1.0 / step})
    core.train.report_validation_metrics(start + 10, {"val_loss": 0.5 / (start + 10)})
    with core.checkpoint.store_path({"steps_completed": start + 10}) as (path, uuid):
        with open(os.path.join(path, "state.json"), "w") as fh:
            json.dump({"step": start + 10}, fh)
    print("RESULT " + json.dumps({"exp": run.experiment_id, "trial": run.trial_id, "run": run.run_id,
                                  "uuid": str(uuid), "restored": restored, "url": run.url}), flush=True)
    if mode == "raise":
        raise RuntimeError("the notebook cell failed")
"""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def master(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("track") / "master", db_url=backend_db_url(request)).start()
    yield m
    m.stop()


def _run(master: MasterProcess, tmp: Path, *args: str, token: str | None, ok: bool = True) -> tuple[Any, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_USER", "DET_PASS"))}
    env.update(DET_MASTER=master.url, DET_JUPYTER_CONFIG_DIR=str(tmp / "no-login"))
    if token is not None:
        env["DET_USER_TOKEN"] = token
    done = subprocess.run([sys.executable, "-c", _RUN, *args], env=env, capture_output=True, text=True,
                          timeout=120)
    if ok:
        assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return (json.loads(lines[0][len("RESULT "):]) if lines else None), done.stderr


def test_a_tracked_run_is_an_unmanaged_experiment_with_metrics_and_a_checkpoint(
        master: MasterProcess, tmp_path: Path) -> None:
    admin = master.admin()
    out, _ = _run(master, tmp_path, "ok", str(tmp_path / "ckpts"), token=master.login("admin"))
    exp = admin.get(f"/api/v1/experiments/{out['exp']}")["experiment"]
    assert (exp["name"], exp["unmanaged"], exp["labels"]) == ("tracked-run", True, ["notebook"])
    assert out["url"] == f"{master.url}/det/experiments/{out['exp']}"
    trial = admin.get(f"/api/v1/trials/{out['trial']}")["trial"]
    assert trial["state"] == "STATE_COMPLETED"
    assert trial["hparams"] == {"lr": 0.1, "layers": 2}
    assert training_steps(admin, out["trial"]) == list(range(1, 11))
    ckpt = admin.get(f"/api/v1/checkpoints/{out['uuid']}")["checkpoint"]
    assert ckpt["state"] == "STATE_COMPLETED" and ckpt["metadata"]["steps_completed"] == 10
    assert json.loads((tmp_path / "ckpts" / out["uuid"] / "state.json").read_text()) == {"step": 10}
    best = admin.get(f"/api/v1/experiments/{out['exp']}/checkpoints?sortByMetric=val_loss")["checkpoints"]
    assert [c["uuid"] for c in best] == [out["uuid"]]


def test_an_external_id_resumes_the_same_trial_from_its_checkpoint(master: MasterProcess, tmp_path: Path) -> None:
    token = master.login("admin")
    first, _ = _run(master, tmp_path, "ok", str(tmp_path / "ck"), "run-42", token=token)
    again, _ = _run(master, tmp_path, "ok", str(tmp_path / "ck"), "run-42", token=token)
    assert (again["exp"], again["trial"]) == (first["exp"], first["trial"])
    assert again["run"] == first["run"] + 1
    assert again["restored"] == {"step": 10}  # the first run's checkpoint, by its uuid
    trial = master.admin().get(f"/api/v1/trials/{first['trial']}")["trial"]
    assert (trial["state"], trial["totalBatchesProcessed"]) == ("STATE_COMPLETED", 20)


def test_a_failing_block_ends_the_trial_in_error(master: MasterProcess, tmp_path: Path) -> None:
    out, err = _run(master, tmp_path, "raise", str(tmp_path / "ck"), token=master.login("admin"), ok=False)
    assert out is not None and "the notebook cell failed" in err
    assert master.admin().get(f"/api/v1/trials/{out['trial']}")["trial"]["state"] == "STATE_ERROR"


def test_without_a_login_or_with_a_bad_token_it_says_what_to_do(master: MasterProcess, tmp_path: Path) -> None:
    out, err = _run(master, tmp_path, "ok", str(tmp_path / "ck"), token=None, ok=False)
    assert out is None and "not logged in" in err and "det user login" in err
    out, err = _run(master, tmp_path, "ok", str(tmp_path / "ck"), token="not-a-token", ok=False)
    assert out is None and "the master refused the run" in err and "401" in err


def test_a_user_tracks_only_where_they_may_create(master: MasterProcess, tmp_path: Path) -> None:
    admin = master.admin()
    ws = admin.post("/api/v1/workspaces", {"name": "track-private"})["workspace"]["id"]
    project = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "tp", "workspaceId": ws})["project"]["id"]
    admin.post("/api/v1/users", {"user": {"username": "tracker", "active": True}, "password": "Tracker-Passw0rd"})
    token = master.login("tracker", "Tracker-Passw0rd")
    out, err = _run(master, tmp_path, "ok", str(tmp_path / "ck"), "", str(project), token=token, ok=False)
    assert out is None and "the master refused the run" in err and "404" in err
    mine, _ = _run(master, tmp_path, "ok", str(tmp_path / "ck"), token=token)  # Uncategorized: an Editor
    exp = admin.get(f"/api/v1/experiments/{mine['exp']}")["experiment"]
    assert exp["username"] == "tracker"
