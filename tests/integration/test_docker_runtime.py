"""DockerRuntime (and MixedRuntime) against a real, private Docker daemon (tests/_docker.py).

Tasks run in ``det-skel:1`` (an empty root file system) with the host's /usr bound read-only,
so the host's Debian python3 runs inside the container; no registry is reachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time
from typing import Any

import pytest

from det_agent import Slot
from det_agent.runtime import DockerRuntime, MixedRuntime, ProcessRuntime, docker_probe
from det_agent.runtime._docker import LABEL_AGENT, LABEL_ALLOCATION
from det_agent.wire import TaskSpec
from tests._docker import Engine
from tests.integration.agent import agent_it_helpers

pytestmark = pytest.mark.slow

SLOTS = [Slot(0, "cpu", "cpu"), Slot(1, "cpu", "cpu")]
AGENT = "dk-agent"
USR = {"host_path": "/usr", "container_path": "/usr", "read_only": True}


class Recorder(agent_it_helpers.Recorder):
    """The agent tests' recorder, with waits long enough for a container."""

    def __init__(self) -> None:
        super().__init__(timeout=30.0)


def _spec(allocation_id: str, entrypoint: Any, image: str, **container: Any) -> dict[str, Any]:
    """A spec as the master sends it (checked against the wire contract)."""
    raw = {
        "task_id": "t-1", "allocation_id": allocation_id, "task_type": "COMMAND",
        "entrypoint": entrypoint,
        "env": {"DET_MASTER": "http://127.0.0.1:1", "DET_SESSION_TOKEN": "session-tok",
                "DET_TASK_ID": "t-1"},
        "slot_ids": [0], "info_files": {"cluster.json": {"cluster_id": "c"}}, "mounts": [],
        "container": {"image": image, "bind_mounts": [USR], **container},
    }
    return TaskSpec.from_wire(raw).to_wire()


def _runtime(tmp_path, engine: Engine, **kw: Any) -> DockerRuntime:
    return DockerRuntime(str(tmp_path / "wd"), agent_id=AGENT, slots=SLOTS, host=engine.host, **kw)


def _containers(engine: Engine, allocation_id: str) -> list[dict]:
    api = engine.api()
    try:
        return api.containers(all=True, filters={"label": f"{LABEL_ALLOCATION}={allocation_id}"})
    finally:
        api.close()


async def _until_removed(engine: Engine, allocation_id: str, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while (left := await asyncio.to_thread(_containers, engine, allocation_id)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return left


def test_probe_names_the_engine(docker_engine: Engine) -> None:
    assert docker_probe(docker_engine.host) == "docker"
    reason = docker_probe("unix:///tmp/no-such-docker.sock")
    assert reason.startswith("no Docker engine at unix:///tmp/no-such-docker.sock")


def test_a_task_sees_its_container(tmp_path, docker_engine: Engine, monkeypatch) -> None:
    monkeypatch.setenv("DET_JUPYTER_IDENTITY", "/secret/identity.json")
    monkeypatch.setenv("DET_AGENT_TOKEN", "agent-secret")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")  # the slots decide a container's GPUs
    monkeypatch.setenv("LANG", "C.UTF-8")
    code = textwrap.dedent("""
        import json, os, sys
        import det_harness
        print(json.dumps({
            "cwd": os.getcwd(), "uid": os.getuid(), "gid": os.getgid(),
            "run": sorted(os.listdir("/run/determined")),
            "info": sorted(os.listdir("/run/determined/info")),
            "env": dict(os.environ), "harness": det_harness.__file__,
        }), flush=True)
        os.execvp("sleep", ["sleep", "2"])
    """)
    spec = _spec("dk.see", ["python3", "-c", code], docker_engine.image)

    async def scenario() -> tuple[Recorder, list[dict]]:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        pid = await rt.start(spec, rec.on_log, rec.on_exit)
        assert pid and rt.running() == ["dk.see"]
        await rec.wait_for(lambda: rec.text("dk.see", "stdout"))
        running = await asyncio.to_thread(_containers, docker_engine, "dk.see")
        assert await rec.wait_exit("dk.see") == (0, None)
        assert rt.running() == []
        assert await _until_removed(docker_engine, "dk.see") == []
        return rec, running

    rec, running = asyncio.run(scenario())
    assert rec.text("dk.see", "stderr") == []
    seen = json.loads(rec.text("dk.see", "stdout")[0])
    assert seen["cwd"] == "/run/determined/workdir"
    assert seen["uid"] != 0 and seen["gid"] != 0
    assert {"info", "home", "workdir", "harness"} <= set(seen["run"])
    assert seen["info"] == ["cluster.json"]
    assert seen["harness"] == "/run/determined/harness/det_harness/__init__.py"
    env = seen["env"]
    assert env["DET_MASTER"] == "http://127.0.0.1:1" and env["DET_SESSION_TOKEN"] == "session-tok"
    assert env["DET_AGENT_ID"] == AGENT and env["DET_CONTAINER_ID"] == "dk.see"
    assert env["DET_SLOT_IDS"] == "[0]" and env["DET_RESOURCES_TYPE"] == "docker-container"
    assert env["PYTHONPATH"].split(":")[0] == "/run/determined/harness"
    assert env["HOME"] == "/run/determined/home"
    assert "DET_JUPYTER_IDENTITY" not in env and "DET_AGENT_TOKEN" not in env
    assert "NVIDIA_VISIBLE_DEVICES" not in env and env["LANG"] == "C.UTF-8"
    assert sys.prefix not in env["PATH"]  # the image's PATH, not the agent's
    (container,) = running
    assert container["Labels"][LABEL_ALLOCATION] == "dk.see"
    assert container["Labels"][LABEL_AGENT] == AGENT


def test_output_arrives_in_order_with_its_stdtype(tmp_path, docker_engine: Engine) -> None:
    code = "import sys\nfor i in range(500):\n    print(f'out {i}', flush=True)\n    print(f'err {i}', file=sys.stderr, flush=True)\n"
    spec = _spec("dk.order", ["python3", "-c", code], docker_engine.image)

    async def scenario() -> Recorder:
        rec = Recorder()
        assert await _runtime(tmp_path, docker_engine).start(spec, rec.on_log, rec.on_exit) is not None
        assert await rec.wait_exit("dk.order") == (0, None)
        return rec

    rec = asyncio.run(scenario())
    assert rec.text("dk.order", "stdout") == [f"out {i}\n" for i in range(500)]
    assert rec.text("dk.order", "stderr") == [f"err {i}\n" for i in range(500)]
    assert [ln.seq for ln in rec.lines["dk.order"]] == list(range(1000))


@pytest.mark.parametrize(
    ("entrypoint", "exit_code"),
    [("exit 0", 0), ("echo bye; exit 3", 3), (["/no/such/binary"], 127)],
)
def test_exit_codes_pass_through(tmp_path, docker_engine: Engine, entrypoint, exit_code: int) -> None:
    aid = f"dk.exit{exit_code}"

    async def scenario() -> tuple[int, str | None]:
        rec = Recorder()
        await _runtime(tmp_path, docker_engine).start(
            _spec(aid, entrypoint, docker_engine.image), rec.on_log, rec.on_exit)
        result = await rec.wait_exit(aid)
        assert await _until_removed(docker_engine, aid) == []
        return result

    assert asyncio.run(scenario())[0] == exit_code


def test_kill_is_a_sigterm_the_task_can_handle(tmp_path, docker_engine: Engine) -> None:
    """A kill reaches the entrypoint as SIGTERM (the container's init passes it on), so the
    task may clean up; it exits as it chooses, reported as killed."""
    spec = _spec("dk.kill", "trap 'echo cleaning up; exit 7' TERM; echo up; "
                            "while true; do sleep 0.1; done", docker_engine.image)

    async def scenario() -> tuple[tuple[int, str | None], float, list[str]]:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: rec.text("dk.kill") == ["up\n"])
        t0 = time.monotonic()
        await rt.kill("dk.kill")
        result = await rec.wait_exit("dk.kill")
        took = time.monotonic() - t0
        assert await _until_removed(docker_engine, "dk.kill") == []
        return result, took, rec.text("dk.kill")

    result, took, text = asyncio.run(scenario())
    assert result == (7, "killed") and text == ["up\n", "cleaning up\n"], (result, text)
    assert took < 5  # well inside the grace: nothing waited for it


def test_a_task_that_ignores_sigterm_is_sigkilled_after_the_grace(tmp_path, docker_engine: Engine) -> None:
    spec = _spec("dk.stubborn", "trap '' TERM; echo up; while true; do sleep 0.1; done",
                 docker_engine.image)

    async def scenario() -> tuple[tuple[int, str | None], float]:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine, kill_grace=1.5)
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: rec.text("dk.stubborn") == ["up\n"])
        t0 = time.monotonic()
        await rt.kill("dk.stubborn")
        result = await rec.wait_exit("dk.stubborn")
        return result, time.monotonic() - t0

    result, took = asyncio.run(scenario())
    assert result == (137, "killed")
    assert 1.5 <= took < 10, took  # SIGKILL came with the grace, not before


def test_a_missing_image_fails_with_the_pull_error(tmp_path, docker_engine: Engine) -> None:
    spec = _spec("dk.pull", "true", "det-no-such-image:1")

    pulls: list[tuple[str, str]] = []

    async def scenario() -> tuple[Recorder, float]:
        rec = Recorder()
        t0 = time.monotonic()
        rt = _runtime(tmp_path, docker_engine, on_pulling=lambda a, image: pulls.append((a, image)))
        assert await rt.start(spec, rec.on_log, rec.on_exit) is None
        return rec, time.monotonic() - t0

    rec, took = asyncio.run(scenario())
    assert pulls == [("dk.pull", "det-no-such-image:1")]  # the agent tells the master: PULLING
    code, reason = rec.exits["dk.pull"]
    assert code == 1 and reason and reason.startswith("pulling image det-no-such-image:1 failed: ")
    assert rec.text("dk.pull", "stdout")[0] == "Pulling image det-no-such-image:1\n"
    assert rec.text("dk.pull", "stderr")[-1] == reason + "\n"
    assert [ln.seq for ln in rec.lines["dk.pull"]] == list(range(len(rec.lines["dk.pull"])))
    assert took < 60
    assert _containers(docker_engine, "dk.pull") == []


def test_out_of_memory_is_reported(tmp_path, docker_engine: Engine) -> None:
    code = "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n"
    spec = _spec("dk.oom", ["python3", "-c", code], docker_engine.image)

    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine, mem_limit=64 << 20)  # an agent setting, not the spec's
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rec.wait_exit("dk.oom")
        return rec

    rec = asyncio.run(scenario())
    if rec.exits["dk.oom"][0] != 137 and "MemoryError" in "".join(rec.text("dk.oom")):
        pytest.skip("the host's cgroups do not enforce container memory limits")
    assert rec.exits["dk.oom"] == (137, "out of memory")
    assert rec.text("dk.oom", "stderr")[-1] == "the container ran out of memory\n"


def test_mixed_runtime_dispatches_by_container(tmp_path, docker_engine: Engine) -> None:
    process = ProcessRuntime(str(tmp_path / "pw"), agent_id=AGENT, slots=SLOTS, isolate=False,
                             warm_start=False)
    mixed = MixedRuntime(process, _runtime(tmp_path, docker_engine))
    # Both run 3 s, so that both are running when the test looks.
    image_task = _spec("dk.mixed.c", "test -d /run/determined/harness && echo in-container && sleep 3",
                       docker_engine.image)
    process_task = {k: v for k, v in image_task.items() if k != "container"}
    process_task.update(allocation_id="dk.mixed.p", entrypoint=f"echo as-process; test -x {sys.executable} && sleep 3")

    async def scenario() -> Recorder:
        rec = Recorder()
        await mixed.start(image_task, rec.on_log, rec.on_exit)
        await mixed.start(process_task, rec.on_log, rec.on_exit)
        assert sorted(mixed.running()) == ["dk.mixed.c", "dk.mixed.p"]
        assert mixed.containers == "docker"
        await rec.wait_exit("dk.mixed.c")
        await rec.wait_exit("dk.mixed.p")
        await mixed.shutdown()
        return rec

    rec = asyncio.run(scenario())
    assert rec.exits == {"dk.mixed.c": (0, None), "dk.mixed.p": (0, None)}
    assert rec.text("dk.mixed.c") == ["in-container\n"]
    assert rec.text("dk.mixed.p") == ["as-process\n"]


def test_shutdown_kills_every_container(tmp_path, docker_engine: Engine) -> None:
    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        for i in range(2):
            await rt.start(_spec(f"dk.down{i}", "echo up; sleep 1000", docker_engine.image),
                           rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: all(rec.text(f"dk.down{i}") for i in range(2)))
        await rt.shutdown()
        assert rt.running() == []
        for i in range(2):
            assert await _until_removed(docker_engine, f"dk.down{i}") == []
        return rec

    rec = asyncio.run(scenario())
    # the shells die of the SIGTERM (128 + 15), well within the grace
    assert rec.exits == {"dk.down0": (143, "killed"), "dk.down1": (143, "killed")}


def test_leftover_containers_of_this_agent_are_removed(tmp_path, docker_engine: Engine) -> None:
    """An agent restarted after a crash finds its old containers running: they go first."""
    api = docker_engine.api()
    old = api.create_container(docker_engine.image, ["sleep", "1000"],
                               labels={LABEL_AGENT: AGENT, LABEL_ALLOCATION: "dk.old"},
                               host_config=api.create_host_config(
                                   mounts=[{"Type": "bind", "Source": "/usr", "Target": "/usr",
                                            "ReadOnly": True}]))["Id"]
    api.start(old)
    api.close()

    async def scenario() -> None:
        rt = _runtime(tmp_path, docker_engine)
        await rt.prepare()
        assert await asyncio.to_thread(_containers, docker_engine, "dk.old") == []
        rec = Recorder()
        await rt.start(_spec("dk.new", "true", docker_engine.image), rec.on_log, rec.on_exit)
        assert await rec.wait_exit("dk.new") == (0, None)

    asyncio.run(scenario())


def test_a_new_runtime_reattaches_to_a_container_that_ended_while_no_agent_watched(
        tmp_path, docker_engine: Engine) -> None:
    """The agent process died (its event loop is gone, nothing was shut down) and the task
    went on to its exit. The next runtime's prepare() with callbacks re-attaches: every line
    the container printed arrives again, numbered from the seq its first line had (after the
    pull's lines), then its own exit code; the container and task dir are removed after."""
    spec = _spec("dk.orphan", "echo one; sleep 1; echo two >&2; echo three; exit 5", docker_engine.image)

    async def first_life() -> list:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: rec.text("dk.orphan") == ["one\n"])
        return rec.lines["dk.orphan"]

    seen = asyncio.run(first_life())  # returns with the container running, unwatched
    api = docker_engine.api()
    deadline = time.monotonic() + 30
    while api.inspect_container(_containers(docker_engine, "dk.orphan")[0]["Id"])["State"]["Running"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)

    async def second_life() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        await rt.prepare(rec.on_log, rec.on_exit)
        assert rt.running() == ["dk.orphan"]
        await rec.wait_exit("dk.orphan")
        assert await _until_removed(docker_engine, "dk.orphan") == []
        return rec

    rec = asyncio.run(second_life())
    assert rec.exits["dk.orphan"] == (5, None)
    replay = rec.lines["dk.orphan"]
    assert [(x.seq, x.stdtype, x.log) for x in replay[:1]] == [(seen[0].seq, "stdout", "one\n")]
    assert sorted(x.log for x in replay) == ["one\n", "three\n", "two\n"]
    assert [x.seq for x in replay] == list(range(seen[0].seq, seen[0].seq + 3))
    assert not (tmp_path / "wd" / "tasks" / "dk.orphan").exists()


def test_prepare_without_callbacks_removes_what_it_finds(tmp_path, docker_engine: Engine) -> None:
    spec = _spec("dk.gone", "echo up; sleep 1000", docker_engine.image)

    async def first_life() -> None:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: rec.text("dk.gone") == ["up\n"])

    asyncio.run(first_life())
    assert len(_containers(docker_engine, "dk.gone")) == 1

    async def second_life() -> None:
        rt = _runtime(tmp_path, docker_engine)
        await rt.prepare()
        assert rt.running() == []
        assert await _until_removed(docker_engine, "dk.gone") == []

    asyncio.run(second_life())


def test_the_task_dir_is_removed_after_the_exit(tmp_path, docker_engine: Engine) -> None:
    async def scenario() -> None:
        rec = Recorder()
        await _runtime(tmp_path, docker_engine).start(
            _spec("dk.dir", "touch /run/determined/workdir/x", docker_engine.image),
            rec.on_log, rec.on_exit)
        assert await rec.wait_exit("dk.dir") == (0, None)
        deadline = time.monotonic() + 5
        while os.path.exists(tmp_path / "wd" / "tasks" / "dk.dir") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert not os.path.exists(tmp_path / "wd" / "tasks" / "dk.dir")


def test_agent_in_docker_mode_runs_image_tasks(tmp_path, docker_engine: Engine, monkeypatch) -> None:
    from det_agent import Agent

    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    agent = Agent("http://127.0.0.1:1", "t", agent_id=AGENT, slots=SLOTS, work_dir=str(tmp_path),
                  warm_start=False, runtime_mode="docker")
    assert agent.containers == "docker"
    assert isinstance(agent.runtime, MixedRuntime) and agent.runtime.docker is not None
    assert agent.runtime.docker.host == docker_engine.host  # type: ignore[attr-defined]
    asyncio.run(agent.runtime.shutdown())


def test_mounts_are_bound_and_a_missing_source_fails_clearly(tmp_path, docker_engine: Engine) -> None:
    shared = tmp_path / "shared"
    spec = _spec("dk.mnt", "ls /determined_shared_fs && touch /nb/ok", docker_engine.image)
    spec["mounts"] = [{"host_path": str(tmp_path), "container_path": "/determined_shared_fs"},
                      {"host_path": str(shared), "container_path": "/nb", "create": True}]
    os.chmod(tmp_path, 0o755)
    bad = _spec("dk.badmnt", "true", docker_engine.image)
    bad["mounts"] = [{"host_path": "/no/such/dir", "container_path": "/data"}]

    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        await rt.start(spec, rec.on_log, rec.on_exit)
        await rt.start(bad, rec.on_log, rec.on_exit)
        await rec.wait_exit("dk.mnt")
        await rec.wait_exit("dk.badmnt")
        return rec

    rec = asyncio.run(scenario())
    assert rec.exits["dk.mnt"] == (0, None), rec.text("dk.mnt")
    assert "shared\n" in rec.text("dk.mnt", "stdout") and (shared / "ok").exists()
    code, reason = rec.exits["dk.badmnt"]
    assert code == 1 and reason and "/no/such/dir" in reason
    assert rec.text("dk.badmnt", "stderr") == [reason + "\n"]
    assert _containers(docker_engine, "dk.badmnt") == []


def test_capabilities_are_dropped_but_those_asked_for(tmp_path, docker_engine: Engine) -> None:
    show = "grep -E '^(CapBnd|NoNewPrivs)' /proc/self/status"
    plain = _spec("dk.caps0", show, docker_engine.image)
    asked = _spec("dk.caps1", show, docker_engine.image, add_capabilities=["NET_RAW"])

    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        for spec in (plain, asked):
            await rt.start(spec, rec.on_log, rec.on_exit)
        for spec in (plain, asked):
            assert await rec.wait_exit(spec["allocation_id"]) == (0, None)
        return rec

    rec = asyncio.run(scenario())
    status = {aid: dict(line.split(":\t") for line in map(str.strip, rec.text(aid)))
              for aid in ("dk.caps0", "dk.caps1")}
    assert status["dk.caps0"] == {"CapBnd": "0000000000000000", "NoNewPrivs": "1"}
    assert int(status["dk.caps1"]["CapBnd"], 16) == 1 << 13  # CAP_NET_RAW
    assert status["dk.caps1"]["NoNewPrivs"] == "1"


def test_force_pull_pulls_even_a_present_image(tmp_path, docker_engine: Engine) -> None:
    spec = _spec("dk.force", "true", docker_engine.image, force_pull=True)

    async def scenario() -> Recorder:
        rec = Recorder()
        assert await _runtime(tmp_path, docker_engine).start(spec, rec.on_log, rec.on_exit) is None
        return rec

    rec = asyncio.run(scenario())  # no registry here: the pull fails, saying so
    assert rec.text("dk.force", "stdout")[0] == f"Pulling image {docker_engine.image}\n"
    code, reason = rec.exits["dk.force"]
    assert code == 1 and reason and reason.startswith(f"pulling image {docker_engine.image} failed: ")


def test_kill_while_pulling_ends_the_task_at_once(tmp_path, docker_engine: Engine) -> None:
    """A registry that accepts connections and never answers: the pull hangs, the kill not."""
    import socket

    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(16)
    image = f"127.0.0.1:{hang.getsockname()[1]}/hang:1"
    spec = _spec("dk.hang", "true", image)

    async def scenario() -> tuple[Recorder, float]:
        rec = Recorder()
        rt = _runtime(tmp_path, docker_engine)
        starting = asyncio.create_task(rt.start(spec, rec.on_log, rec.on_exit))
        await rec.wait_for(lambda: rec.text("dk.hang"))
        await asyncio.sleep(0.5)  # the engine is now waiting for the registry
        assert "dk.hang" not in rec.exits
        t0 = time.monotonic()
        await rt.kill("dk.hang")
        assert await asyncio.wait_for(starting, 5) is None
        return rec, time.monotonic() - t0

    try:
        rec, took = asyncio.run(scenario())
    finally:
        hang.close()
    assert rec.exits["dk.hang"] == (137, "killed while pulling its image")
    assert rec.text("dk.hang", "stdout") == [f"Pulling image {image}\n"]
    assert took < 2
