"""Issue 29: a stock ``determined==0.38.1`` Core API trial, unchanged, in a Docker container (a
private daemon, tests/_docker.py), with checkpoints the stock package writes through the
shared_fs mount at its container path; paused and resumed from its checkpoint.

The image is the registry-free skeleton; the config's own ``bind_mounts`` bring the host's /usr,
the stock client's virtual environment and the Python it was made from, read-only, as a team
would bind a shared software tree.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import _docker
from tests._docker import Engine
from tests._master import MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def docker_master(docker_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = _docker.docker_master(docker_engine, tmp_path_factory.mktemp("docker-stock") / "master", slots=1)
    yield m
    m.stop()


def _mounts(python: str) -> list[dict]:
    """/usr, the venv and its base Python, read-only (the base only when outside /usr)."""
    prefixes = json.loads(subprocess.run(
        [python, "-c", "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix]))"],
        capture_output=True, text=True, check=True, timeout=60).stdout)
    paths = ["/usr", *(p for p in prefixes if not p.startswith("/usr/"))]
    return [{"host_path": p, "container_path": p, "read_only": True} for p in dict.fromkeys(paths)]


def test_a_stock_trial_checkpoints_pauses_and_resumes_in_a_container(
        det_env, docker_master: MasterProcess, docker_engine: Engine) -> None:
    client = docker_master.admin()
    cfg = yaml.safe_load(f.steps_config(det_env.python, name="stock-in-docker", length=40,
                                        hparams={"sleep": 0.1, "every": 5}))
    cfg["environment"] = {"image": docker_engine.image}
    cfg["bind_mounts"] = _mounts(str(det_env.python))
    exp_id = create_experiment(client, yaml.safe_dump(cfg), f.STEPS_DIR)["experiment"]["id"]
    tid = f.only_trial(client, exp_id)["id"]
    f.wait_log(client, tid, "CHECKPOINT step=5", timeout=120)
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    assert f.wait_state(client, exp_id, {"STATE_PAUSED"}, timeout=120) == "STATE_PAUSED"
    assert any(c["state"] == "STATE_COMPLETED" for c in f.checkpoints(client, tid))
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
    log = f.log_text(client, tid)
    starts = re.findall(r"TRIAL-START trial=\d+ .* latest=(\S+)", log)
    assert len(starts) == 2 and starts[0] == "None", log[-3000:]
    by_uuid = {c["uuid"]: c["metadata"]["steps_completed"] for c in f.checkpoints(client, tid)}
    assert f"RESUMED-FROM {by_uuid[starts[1]]}" in log and by_uuid[starts[1]] > 0, log[-3000:]
    final = [c for c in f.checkpoints(client, tid) if c["state"] == "STATE_COMPLETED"]
    last = max(final, key=lambda c: c["metadata"]["steps_completed"])
    assert last["metadata"]["steps_completed"] == 40
    # the stock package wrote it through the mount: the files are on the host's storage
    storage = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["config"]["checkpoint_storage"]
    assert json.loads((Path(storage["host_path"]) / last["uuid"] / "state.json").read_text())["step"] == 40
