"""The stock ``det experiment delete-tb-files`` against det-jupyter: the experiment's TensorBoard
files go from its checkpoint storage; its checkpoints, and other experiments' files, stay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.compat
PW = "TbFiles-Passw0rd"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("tb-files") / "master").start()
    yield m
    m.stop()


def test_delete_tb_files(det_env, master: MasterProcess) -> None:
    admin = master.admin()
    cfg = yaml.safe_load(counter_config(length=5))
    ck = master.data_dir / "checkpoints"  # where the cluster's tasks may write
    cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(ck)}
    ws = admin.post("/api/v1/workspaces", {"name": "tb-private"})["workspace"]["id"]
    project = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "tb-p", "workspaceId": ws})["project"]["id"]
    exp_id = create_experiment(admin, yaml.safe_dump(cfg), COUNTER, projectId=project)["experiment"]["id"]
    state = wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
    assert state == "STATE_COMPLETED", state
    cluster_id = admin.get("/api/v1/master")["clusterId"]
    tb = ck / cluster_id / "tensorboard" / "experiment"
    (tb / str(exp_id) / "trial").mkdir(parents=True)
    (tb / str(exp_id) / "trial" / "events.out.tfevents.1").write_bytes(b"x" * 100)
    (tb / "999").mkdir()  # another experiment's
    ckpts = [c["uuid"] for c in admin.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]]
    assert ckpts

    admin.post("/api/v1/users", {"user": {"username": "tb-outsider", "active": True}, "password": PW})
    # not a member of the experiment's workspace (users are Editors of Uncategorized only)
    refused = det_env.det(["e", "delete-tb-files", str(exp_id)], master.url, user="tb-outsider", password=PW)
    assert refused.returncode != 0 and "not found" in refused.stderr and "Traceback" not in refused.stderr
    assert (tb / str(exp_id)).is_dir()

    done = det_env.det(["e", "delete-tb-files", str(exp_id)], master.url, user="admin", password=ADMIN_PASSWORD)
    assert done.returncode == 0, done.stderr
    assert not (tb / str(exp_id)).exists() and (tb / "999").is_dir()
    assert all((ck / u).is_dir() for u in ckpts)  # the checkpoints stay
    again = det_env.det(["e", "delete-tb-files", str(exp_id)], master.url, user="admin", password=ADMIN_PASSWORD)
    assert again.returncode == 0, again.stderr  # nothing left to delete is no error
    missing = det_env.det(["e", "delete-tb-files", "987654"], master.url, user="admin", password=ADMIN_PASSWORD)
    assert missing.returncode != 0 and "not found" in missing.stderr
