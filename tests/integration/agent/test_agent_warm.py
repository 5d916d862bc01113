"""Warm starts: Python tasks forked from the agent's launcher behave like cold-started ones."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from agent_it_helpers import Recorder, processes_with, wait_gone

from det_agent import ProcessRuntime, Slot
from det_agent.runtime._warm import WarmLauncher

PY = sys.executable
SLOTS = [Slot(0, "cpu", "cpu")]

# What a task sees of itself; `det_harness` already imported is the mark of a warm start.
PROBE = textwrap.dedent("""
    import json, os, sys
    warm = "det_harness" in sys.modules
    info = {
        "warm": warm, "argv": sys.argv, "cwd": os.getcwd(), "name": __name__,
        "path0": sys.path[0], "pid": os.getpid(), "container": os.environ.get("DET_CONTAINER_ID"),
        "user_env": os.environ.get("FROM_SPEC"), "pgid_is_pid": os.getpgid(0) == os.getpid(),
        "run_dir": sorted(os.listdir("/run/determined")) if os.path.isdir("/run/determined") else None,
    }
    print(json.dumps(info), flush=True)
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")


def _spec(allocation_id: str, entrypoint, **extra) -> dict:
    return {"allocation_id": allocation_id, "entrypoint": entrypoint, "env": {"FROM_SPEC": "yes"},
            "slot_ids": [0], "context_url": None, "info_files": {"marker": "x"}, "mounts": [], **extra}


def _script(tmp_path: Path, body: str, name: str = "probe.py") -> str:
    path = tmp_path / "scripts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return str(path)


async def _run(rt: ProcessRuntime, spec: dict) -> tuple[Recorder, int]:
    rec = Recorder()
    assert await rt.start(spec, rec.on_log, rec.on_exit)
    code, _ = await rec.wait_exit(spec["allocation_id"])
    return rec, code


def test_a_python_script_starts_warm_with_the_task_state(tmp_path, task_shared_dir, isolate: bool) -> None:
    script = _script(task_shared_dir, PROBE)

    async def scenario() -> list[tuple[Recorder, int]]:
        rt = ProcessRuntime(str(tmp_path / "wd"), agent_id="w", slots=SLOTS, isolate=isolate)
        try:
            return [await _run(rt, _spec(f"a.{i}", [PY, script, "7", "extra"])) for i in range(2)]
        finally:
            await rt.shutdown()

    for i, (rec, code) in enumerate(asyncio.run(scenario())):
        assert code == 7
        info = json.loads(rec.text(f"a.{i}", "stdout")[0])
        assert info["warm"] is True
        assert info["argv"] == [script, "7", "extra"]
        assert info["name"] == "__main__" and info["path0"] == str(Path(script).parent)
        assert info["container"] == f"a.{i}"
        assert info["user_env"] == "yes"
        if isolate:  # pid 1 of its own namespace (its process group lies outside it)
            assert info["pid"] == 1 and info["run_dir"] == ["home", "info", "workdir"]
            assert info["cwd"] == "/run/determined/workdir"
        else:
            assert info["cwd"].endswith(f"a.{i}/work") and info["pgid_is_pid"]
        assert rec.text(f"a.{i}", "stderr") == ["to stderr\n"]


def test_errors_and_exits_read_as_in_a_cold_start(tmp_path) -> None:
    crash = _script(tmp_path, "def f():\n    raise ValueError('boom')\nf()\n", "crash.py")
    message = _script(tmp_path, "import sys\nsys.exit('bad config: lr')\n", "message.py")
    ending = _script(tmp_path, textwrap.dedent("""
        import atexit, sys, threading, time
        atexit.register(lambda: print("atexit ran"))
        def late():
            time.sleep(0.2)
            print("thread done")
        threading.Thread(target=late).start()
        print("main done")  # no flush: exiting must flush it
        sys.exit(3)
    """), "ending.py")
    module_dir = tmp_path / "pkg"
    module_dir.mkdir()
    (module_dir / "__init__.py").write_text("")
    (module_dir / "main.py").write_text("import sys\nprint('module', sys.argv[1:], __name__)\n")

    async def scenario() -> dict[str, tuple[Recorder, int]]:
        rt = ProcessRuntime(str(tmp_path / "wd"), agent_id="w", slots=SLOTS, isolate=False)
        try:
            return {
                "crash": await _run(rt, _spec("c.1", [PY, crash])),
                "message": await _run(rt, _spec("m.1", [PY, "-u", message])),
                "ending": await _run(rt, _spec("e.1", [PY, ending])),
                "module": await _run(rt, _spec("p.1", f"{PY} -m pkg.main x y",
                                              env={"PYTHONPATH": str(tmp_path)})),
            }
        finally:
            await rt.shutdown()

    out = asyncio.run(scenario())
    rec, code = out["crash"]
    assert code == 1
    err = "".join(rec.text("c.1", "stderr"))
    assert "ValueError: boom" in err and "Traceback" in err
    rec, code = out["message"]
    assert code == 1 and rec.text("m.1", "stderr") == ["bad config: lr\n"]
    rec, code = out["ending"]
    assert code == 3 and rec.text("e.1", "stdout") == ["main done\n", "thread done\n", "atexit ran\n"]
    rec, code = out["module"]
    assert code == 0 and rec.text("p.1", "stdout") == ["module ['x', 'y'] __main__\n"]


def test_kill_takes_the_task_and_what_it_started(tmp_path, task_shared_dir, isolate: bool) -> None:
    script = _script(task_shared_dir, textwrap.dedent("""
        import subprocess, sys, time
        subprocess.Popen(["sleep", "1000.4242"])
        print("ready", flush=True)
        time.sleep(1000)
    """))

    async def scenario() -> tuple[int, list[int]]:
        rt = ProcessRuntime(str(tmp_path / "wd"), agent_id="w", slots=SLOTS, isolate=isolate)
        rec = Recorder()
        try:
            await rt.start(_spec("k.1", [PY, script]), rec.on_log, rec.on_exit)
            await rec.wait_for(lambda: rec.text("k.1", "stdout") == ["ready\n"])
            assert processes_with("1000.4242")
            await rt.kill("k.1")
            code, _ = await rec.wait_exit("k.1")
            return code, await wait_gone("1000.4242")
        finally:
            await rt.shutdown()

    code, survivors = asyncio.run(scenario())
    assert code == 137 and survivors == []


def test_other_commands_start_cold_and_a_dead_launcher_is_replaced(tmp_path) -> None:
    script = _script(tmp_path, PROBE)

    async def scenario() -> list[bool]:
        rt = ProcessRuntime(str(tmp_path / "wd"), agent_id="w", slots=SLOTS, isolate=False)
        seen = []
        try:
            for i, entry in enumerate([f"{PY} {script} | cat", [PY, script], "kill-launcher", [PY, script]]):
                if entry == "kill-launcher":
                    os.kill(rt._warm._proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
                    await asyncio.sleep(0.3)
                    continue
                rec, code = await _run(rt, _spec(f"o.{i}", entry))
                assert code == 0, rec.text(f"o.{i}")
                seen.append(json.loads(rec.text(f"o.{i}", "stdout")[0])["warm"])
        finally:
            await rt.shutdown()
        return seen

    assert asyncio.run(scenario()) == [False, True, True]


@pytest.mark.parametrize(("entrypoint", "expected"), [
    (f"{PY} train.py --lr 0.1", ["train.py", "--lr", "0.1"]),
    ("python3 train.py", ["train.py"]),
    ("python -u -m pkg.mod a", ["-u", "-m", "pkg.mod", "a"]),
    (["python3", "train.py", "a b"], ["train.py", "a b"]),
    ("python3 'my script.py'", ["my script.py"]),
    ("python3 -c 'print(1)'", None),
    ("python3 -O train.py", None),
    ("python3", None),
    ("python3 -m", None),
    ("python3 train.py > out.txt", None),
    ("LR=1 python3 train.py", None),
    ("cd x && python3 train.py", None),
    ("/usr/bin/python3 train.py", None),
    ("pip install x", None),
])
def test_which_commands_start_warm(entrypoint, expected) -> None:
    launcher = WarmLauncher(env={"PATH": "/usr/bin"}, harness=None)
    env = {"PATH": f"{os.path.dirname(PY)}:/usr/bin"}
    assert launcher.python_argv(entrypoint, env) == expected


def test_interpreter_settings_that_differ_start_cold() -> None:
    launcher = WarmLauncher(env={"PATH": "/usr/bin", "PYTHONHASHSEED": "0"}, harness=None)
    env = {"PATH": f"{os.path.dirname(PY)}:/usr/bin", "PYTHONPATH": "/x", "PYTHONUNBUFFERED": "1"}
    assert launcher.python_argv("python3 t.py", {**env, "PYTHONHASHSEED": "0"}) == ["t.py"]
    assert launcher.python_argv("python3 t.py", env) is None
    assert launcher.python_argv("python3 t.py", {**env, "PYTHONHASHSEED": "0", "PYTHONOPTIMIZE": "1"}) is None
