"""``det cmd run`` from the stock client: the command runs on the cluster, its output streams back
and the stream ends when it exits; the master records how it ended."""

from __future__ import annotations

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


def test_det_cmd_run_streams_output_and_records_the_exit(det_env, master: MasterProcess) -> None:
    res = det_env.det(["cmd", "run", "echo out-$((6*7)); exit 3"], master.url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert "out-42" in res.stdout and "Task log stream ended" in res.stdout, res.stdout
    client = master.admin()
    [cmd] = client.get("/api/v1/commands")["commands"]
    det_env.check_shape("v1GetCommandsResponse", client.get("/api/v1/commands"))
    assert (cmd["state"], cmd["exitStatus"]) == ("STATE_TERMINATED", "exited with code 3")

    res = det_env.det(["cmd", "run", "echo", "two", "words"], master.url, **ADMIN)
    assert res.returncode == 0 and "two words" in res.stdout, res.stderr


def test_a_command_larger_than_the_pool_is_accepted_with_a_warning(det_env, master: MasterProcess) -> None:
    client = master.admin()
    launched = client.post("/api/v1/commands", {"config": {"entrypoint": ["true"], "resources": {"slots": 64}}})
    det_env.check_shape("v1LaunchCommandResponse", launched)
    assert launched["warnings"] == ["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"]
    task_id = launched["command"]["id"]
    job = wait_for(lambda: [j["full"] for j in client.get("/api/v1/job-queues-v2")["jobs"]
                            if j["full"]["entityId"] == task_id], what="the command in the queue")[0]
    assert job["type"] == "TYPE_COMMAND" and job["summary"]["state"] == "STATE_QUEUED"
    assert job["waitReason"].startswith("needs 64 slots"), job["waitReason"]
    client.post(f"/api/v1/commands/{task_id}/kill")
    wait_for(lambda: client.get(f"/api/v1/commands/{task_id}")["command"]["state"] == "STATE_TERMINATED",
             what="the killed command ended")
