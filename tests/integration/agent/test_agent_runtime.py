"""ProcessRuntime with real processes: logs, exit codes, kills, isolation, PDEATHSIG."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from agent_it_helpers import (
    ISOLATION,
    NO_ISOLATION_REASON,
    Recorder,
    processes_holding,
    processes_with,
    wait_gone,
)

from det_agent import ProcessRuntime, Slot

PY = sys.executable
SLOTS = [Slot(0, "cpu", "cpu"), Slot(1, "cpu", "cpu")]


def _runtime(tmp_path, isolate: bool) -> ProcessRuntime:
    return ProcessRuntime(str(tmp_path / "wd"), agent_id="t-agent", slots=SLOTS, isolate=isolate)


def _spec(allocation_id: str, entrypoint, **extra) -> dict:
    return {
        "allocation_id": allocation_id,
        "entrypoint": entrypoint,
        "env": {},
        "slot_ids": [0],
        "context_url": None,
        "info_files": {},
        "mounts": [],
        **extra,
    }


def test_interleaved_output_arrives_complete_and_in_order(tmp_path, isolate: bool) -> None:
    code = textwrap.dedent("""
        import sys
        for i in range(2000):
            print(f"out {i}", flush=True)
            print(f"err {i}", file=sys.stderr, flush=True)
    """)

    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, isolate)
        assert await rt.start(_spec("a.1", [PY, "-c", code]), rec.on_log, rec.on_exit)
        assert await rec.wait_exit("a.1") == (0, None)
        return rec

    rec = asyncio.run(scenario())
    assert rec.text("a.1", "stdout") == [f"out {i}\n" for i in range(2000)]
    assert rec.text("a.1", "stderr") == [f"err {i}\n" for i in range(2000)]
    assert [line.seq for line in rec.lines["a.1"]] == list(range(4000))
    assert rec.events[-1] == ("exit", "a.1")


@pytest.mark.parametrize(
    ("entrypoint", "exit_code"),
    [("exit 0", 0), ("echo bye; exit 3", 3), (["/no/such/binary"], 127)],
)
def test_exit_codes(tmp_path, isolate: bool, entrypoint, exit_code: int) -> None:
    async def scenario() -> tuple[int, str | None]:
        rec = Recorder()
        await _runtime(tmp_path, isolate).start(_spec("a.1", entrypoint), rec.on_log, rec.on_exit)
        return await rec.wait_exit("a.1")

    assert asyncio.run(scenario())[0] == exit_code


def test_a_signalled_task_reports_128_plus_the_signal(tmp_path, isolate: bool) -> None:
    async def scenario() -> tuple[int, str | None]:
        rec = Recorder()
        pid = await _runtime(tmp_path, isolate).start(
            _spec("a.1", "echo up; sleep 1000"), rec.on_log, rec.on_exit
        )
        await rec.wait_for(lambda: rec.text("a.1"))
        os.kill(pid, signal.SIGKILL)  # e.g. the OOM killer
        return await rec.wait_exit("a.1")

    assert asyncio.run(scenario()) == (137, None)


@pytest.mark.parametrize("how", ["kill", "normal-exit"])
def test_no_process_outlives_its_task(tmp_path, isolate: bool, how: str) -> None:
    marker = f"det-agent-test-{uuid.uuid4().hex}"
    child = f"{PY} -c 'print(\"child up\", flush=True); import time; time.sleep(1000)' {marker} &"
    entry = f"{child} sleep 1000" if how == "kill" else f"{child} sleep 0.5; exit 0"

    async def scenario() -> tuple[tuple[int, str | None], list[int]]:
        rec = Recorder()
        rt = _runtime(tmp_path, isolate)
        await rt.start(_spec("a.1", entry), rec.on_log, rec.on_exit)
        await rec.wait_for(lambda: rec.text("a.1") == ["child up\n"])
        if how == "kill":
            assert processes_with(marker), "the background grandchild should be running"
            await rt.kill("a.1")
        result = await rec.wait_exit("a.1")
        assert rt.running() == []
        return result, await wait_gone(marker)

    result, survivors = asyncio.run(scenario())
    assert result == ((137, "killed") if how == "kill" else (0, None))
    assert survivors == []


def test_context_download_failure_is_reported(tmp_path) -> None:
    spec = _spec(
        "a.1",
        "true",
        context_url="/api/v1/tasks/t/context_directory",
        env={"DET_MASTER": "http://127.0.0.1:9", "DET_SESSION_TOKEN": "x"},
    )

    async def scenario() -> Recorder:
        rec = Recorder()
        assert await _runtime(tmp_path, False).start(spec, rec.on_log, rec.on_exit) is None
        return rec

    rec = asyncio.run(scenario())
    code, reason = rec.exits["a.1"]
    assert code == 1 and reason and reason.startswith("context download failed: GET http://127")
    assert rec.lines["a.1"][0].stdtype == "stderr"
    assert rec.text("a.1") == [reason + "\n"]


def test_kill_while_preparing_never_spawns(tmp_path) -> None:
    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, False)
        start = asyncio.create_task(
            rt.start(_spec("a.1", "echo should-not-run"), rec.on_log, rec.on_exit)
        )
        await asyncio.sleep(0)  # start() registered the allocation and awaits its task dir
        assert rt.running() == ["a.1"]
        await rt.kill("a.1")
        assert await start is None
        return rec

    rec = asyncio.run(scenario())
    assert rec.exits["a.1"] == (137, "killed before it started")


@pytest.mark.skipif(not ISOLATION, reason=NO_ISOLATION_REASON)
def test_each_task_sees_its_own_run_determined_and_mounts(tmp_path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # tasks run as an unprivileged account, not as the test's user
    container_path = f"/tmp/det-agent-test-mnt-{uuid.uuid4().hex}"
    entry = (
        "cat /run/determined/info/cluster.json; echo; sleep 0.3; "
        "cat /run/determined/info/cluster.json; echo; "
        f"echo $DET_CONTAINER_ID > {container_path}/$DET_CONTAINER_ID"
    )

    async def scenario() -> Recorder:
        rec = Recorder()
        rt = _runtime(tmp_path, True)
        for n in (1, 2):
            spec = _spec(
                f"a.{n}",
                entry,
                info_files={"cluster.json": {"task": n}},
                mounts=[{"host_path": str(shared), "container_path": container_path}],
            )
            assert await rt.start(spec, rec.on_log, rec.on_exit)
        for n in (1, 2):
            assert await rec.wait_exit(f"a.{n}") == (0, None)
        return rec

    try:
        rec = asyncio.run(scenario())
    finally:
        os.rmdir(container_path)
    for n in (1, 2):
        assert [json.loads(t) for t in rec.text(f"a.{n}", "stdout")] == [{"task": n}] * 2
        assert (shared / f"a.{n}").read_text() == f"a.{n}\n"
        if os.geteuid() == 0:  # written as the task's own account, never as root
            assert (shared / f"a.{n}").stat().st_uid != 0


PARENT = textwrap.dedent("""
    import asyncio, sys
    from det_agent import ProcessRuntime, Slot

    async def main():
        wd, isolate, entrypoint = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
        rt = ProcessRuntime(wd, agent_id="p", slots=[Slot(0, "cpu", "cpu")], isolate=isolate)
        spec = {"allocation_id": "p.1", "slot_ids": [0], "entrypoint": entrypoint}
        pid = await rt.start(spec, lambda *a: None, lambda *a: None)
        print("READY", pid, flush=True)
        await asyncio.sleep(1000)

    asyncio.run(main())
""")

#: A Python script starts warm (forked by the launcher); ``-c`` starts cold (an interpreter,
#: inside ``unshare`` when isolated). Each way has its own chain of parent-death signals.
WARM_TASK = "import sys, time\nheld = open(sys.argv[1], 'w')\ntime.sleep(1000)\n"

#: How many times each case kills its agent right after the task started (where the races
#: are): CI runs a few, ``DET_TEST_AGENT_DEATH_REPEAT=200`` the full count.
DEATH_REPEAT = int(os.environ.get("DET_TEST_AGENT_DEATH_REPEAT", "3"))


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_task_dies_with_the_agent_process(tmp_path, task_shared_dir, isolate: bool, start: str) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    (task_shared_dir / "task.py").write_text(WARM_TASK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    find = processes_with if start == "cold" else processes_holding
    survived = []
    for attempt in range(DEATH_REPEAT):
        marker = f"det-agent-test-{uuid.uuid4().hex}"
        if start == "cold":
            entry = [PY, "-c", "import time; time.sleep(1000)", marker]
        else:
            entry = [PY, str(task_shared_dir / "task.py"), str(task_shared_dir / marker)]
        parent = subprocess.Popen(
            [PY, str(script), str(tmp_path / "wd"), "1" if isolate else "0", *entry],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert parent.stdout is not None
            assert parent.stdout.readline().startswith(b"READY")
            if attempt == 0:  # later attempts kill it sooner, while it may still be starting
                asyncio.run(_wait_present(marker, find))
            parent.kill()
            parent.wait()
            if left := asyncio.run(wait_gone(marker, timeout=5.0, find=find)):
                survived.append((attempt, left))
        finally:
            parent.kill()
            for pid in find(marker):
                os.kill(pid, signal.SIGKILL)
    assert survived == [], f"tasks outlived their agent in {len(survived)} of {DEATH_REPEAT}"


async def _wait_present(marker: str, find, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not find(marker):
        assert time.monotonic() < deadline, "the task should be running"
        await asyncio.sleep(0.02)
