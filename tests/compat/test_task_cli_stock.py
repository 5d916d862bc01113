"""The stock ``det task`` group (0.38.1): logs of any task by its full id, its config, kill, and
generic tasks — create from a file and a context directory, fork, pause and unpause — with a
second, non-admin user refused on someone else's task."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, MasterProcess, wait_for

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}
BOB_PW = "Bob-Passw0rd-task"
BOB = {"user": "bob", "password": BOB_PW}


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("task-cli") / "master").start()
    m.admin().post(
        "/api/v1/users", {"user": {"username": "bob", "active": True}, "password": BOB_PW}
    )
    yield m
    m.stop()


def _created(res) -> str:
    assert res.returncode == 0, res.stdout + res.stderr
    match = re.search(r"Created task (\S+)", res.stdout)
    assert match, res.stdout
    return match.group(1)


def _state(client, task_id: str) -> str:
    return client.get(f"/api/v1/tasks/{task_id}")["task"].get("taskState", "")


def _wait_state(client, task_id: str, state: str, timeout: float = 60) -> None:
    wait_for(
        lambda: _state(client, task_id) == f"GENERIC_TASK_STATE_{state}",
        timeout=timeout,
        what=f"task {task_id} {state}",
    )


def _logs(det_env, master: MasterProcess, task_id: str, **who: str) -> str:
    res = det_env.det(["task", "logs", task_id], master.url, **(who or ADMIN))
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_logs_config_and_kill_of_commands_by_full_id(det_env, master: MasterProcess) -> None:
    client = master.admin()
    res = det_env.det(["cmd", "run", "echo cmd-out-$((6*7))"], master.url, **ADMIN)
    assert res.returncode == 0, res.stderr
    [cmd] = client.get("/api/v1/commands")["commands"]
    assert str(uuid.UUID(cmd["id"])) == cmd["id"]  # a plain UUID, as 0.38.1's
    assert "cmd-out-42" in _logs(det_env, master, cmd["id"])

    res = det_env.det(["task", "config", cmd["id"], "--json"], master.url, **ADMIN)
    assert res.returncode == 0 and "cmd-out-$((6*7))" in res.stdout, res.stdout + res.stderr
    det_env.check_shape(
        "v1GetGenericTaskConfigResponse", client.get(f"/api/v1/tasks/{cmd['id']}/config")
    )

    live = client.post("/api/v1/commands", {"config": {"entrypoint": ["sleep 300"]}})["command"][
        "id"
    ]
    wait_for(
        lambda: client.get(f"/api/v1/commands/{live}")["command"]["state"] == "STATE_RUNNING",
        what="the sleeping command running",
    )
    for verb in ("kill", "pause"):  # bob may see admin's command, not change it
        res = det_env.det(["task", verb, live], master.url, **BOB)
        assert res.returncode != 0 and "owner" in res.stdout + res.stderr, res.stdout + res.stderr
    res = det_env.det(["task", "pause", live], master.url, **ADMIN)
    assert res.returncode != 0 and "only generic tasks" in res.stdout + res.stderr, (
        res.stdout + res.stderr
    )
    assert client.get(f"/api/v1/commands/{live}")["command"]["state"] == "STATE_RUNNING"
    res = det_env.det(["task", "kill", live], master.url, **ADMIN)
    assert res.returncode == 0, res.stdout + res.stderr
    wait_for(
        lambda: client.get(f"/api/v1/commands/{live}")["command"]["state"] == "STATE_TERMINATED",
        what="the killed command ended",
    )


def test_generic_task_create_fork_pause_unpause_kill(
    det_env, master: MasterProcess, tmp_path: Path
) -> None:
    client = master.admin()
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "data.txt").write_text("from-the-context\n")
    spec = tmp_path / "task.yaml"
    spec.write_text(
        "entrypoint: [sh, -c, 'cat data.txt; echo gen-$((2+3))']\nresources: {slots: 0}\n"
    )
    task = _created(det_env.det(["task", "create", str(spec), "-c", str(ctx)], master.url, **ADMIN))
    _wait_state(client, task, "COMPLETED")
    out = _logs(det_env, master, task)
    assert "from-the-context" in out and "gen-5" in out, out
    got = client.get(f"/api/v1/tasks/{task}")
    det_env.check_shape("v1GetTaskResponse", got)
    assert got["task"]["taskType"] == "TASK_TYPE_GENERIC"
    res = det_env.det(["task", "config", task], master.url, **ADMIN)
    assert res.returncode == 0 and "cat data.txt" in res.stdout and "slots: 0" in res.stdout, (
        res.stdout
    )

    fork = _created(det_env.det(["task", "fork", task], master.url, **ADMIN))
    assert fork != task
    _wait_state(client, fork, "COMPLETED")
    assert "from-the-context" in _logs(det_env, master, fork)  # its config and context
    assert client.get(f"/api/v1/tasks/{fork}")["task"]["forkedFrom"] == task

    spec.write_text(
        "entrypoint: [sh, -c, 'echo started-$DET_ALLOCATION_ID; exec sleep 300']\n"
        "resources: {slots: 0}\n"
    )
    live = _created(det_env.det(["task", "create", str(spec)], master.url, **ADMIN))
    wait_for(
        lambda: f"started-{live}.1" in _logs(det_env, master, live), what="the first allocation"
    )
    res = det_env.det(["task", "pause", live], master.url, **BOB)
    assert res.returncode != 0 and "owner" in res.stdout + res.stderr, res.stdout + res.stderr
    res = det_env.det(["task", "pause", live], master.url, **ADMIN)
    assert res.returncode == 0 and f"Paused task: {live}" in res.stdout, res.stdout + res.stderr
    _wait_state(client, live, "PAUSED")
    res = det_env.det(["task", "pause", live], master.url, **ADMIN)  # paused already
    assert res.returncode != 0 and "PAUSED" in res.stdout + res.stderr, res.stdout + res.stderr
    res = det_env.det(["task", "unpause", live], master.url, **ADMIN)
    assert res.returncode == 0, res.stdout + res.stderr
    wait_for(
        lambda: f"started-{live}.2" in _logs(det_env, master, live), what="the second allocation"
    )
    assert _state(client, live) == "GENERIC_TASK_STATE_ACTIVE"
    res = det_env.det(["task", "kill", live], master.url, **BOB)
    assert res.returncode != 0 and _state(client, live) == "GENERIC_TASK_STATE_ACTIVE"
    res = det_env.det(["task", "kill", live], master.url, **ADMIN)
    assert res.returncode == 0 and "killed task" in res.stdout, res.stdout + res.stderr
    _wait_state(client, live, "CANCELED")


def test_bad_generic_configs_are_refused_by_name(
    det_env, master: MasterProcess, tmp_path: Path
) -> None:
    spec = tmp_path / "bad.yaml"
    for text, says in [
        ("entrypoint: []\n", "entrypoint"),
        ("entrypont: [echo]\n", "entrypont"),
        ("entrypoint: [echo]\nresources: {slots: -1}\n", "slots"),
    ]:
        spec.write_text(text)
        res = det_env.det(["task", "create", str(spec)], master.url, **ADMIN)
        assert res.returncode != 0 and says in res.stdout + res.stderr, (
            text,
            res.stdout + res.stderr,
        )
    # What the stock client cannot send (it reads the file as a mapping first), over REST.
    client = master.admin()
    for body, says in [
        ({"config": "- a list\n", "contextDirectory": []}, "mapping"),
        ({"config": "", "contextDirectory": []}, "no config"),
        ({"config": "", "contextDirectory": [], "forkedFrom": str(uuid.uuid4())}, "not found"),
    ]:
        with pytest.raises(ApiError) as err:
            client.post("/api/v1/generic-tasks", body)
        assert err.value.status in (400, 404) and says in str(err.value), (body, err.value)
    res = det_env.det(["task", "config", str(uuid.uuid4())], master.url, **ADMIN)
    assert res.returncode != 0 and "not found" in res.stdout + res.stderr, res.stdout + res.stderr
