"""Pure builders: task environment, argv, isolation wrapper, task directory, context archive."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from det_agent.runtime._isolation import Identity, mount_plan
from det_agent.runtime._launch import build_env, entrypoint_argv, isolated_argv, open_parent_lock
from det_agent.runtime._taskdir import (
    LaunchError,
    extract_context,
    make_task_dir,
    snapshot_model_dir,
    write_info_files,
)

SLOTS = {0: "cuda", 1: "cuda", 2: "cpu"}


def _env(spec_env: dict, slot_ids: list[int], *, base: dict | None = None, **kw) -> dict:
    spec = {"allocation_id": "3.abc.1", "env": spec_env, "slot_ids": slot_ids}
    kw.setdefault("harness", "/opt/harness")
    kw.setdefault("python_bin", "/venv/bin")
    return build_env(
        spec,
        base=base or {"PATH": "/usr/bin", "HOME": "/root"},
        agent_id="gpu-1",
        slot_types=SLOTS,
        **kw,
    )


def test_env_layers_and_agent_fields() -> None:
    env = _env({"DET_MASTER": "http://m:1", "HOME": "/task"}, [0, 1])
    assert env == {
        "PATH": "/venv/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin",
        "HOME": "/task",  # spec.env wins over the agent's environment
        "DET_MASTER": "http://m:1",
        "DET_AGENT_ID": "gpu-1",
        "DET_CONTAINER_ID": "3.abc.1",
        "DET_SLOT_IDS": "[0,1]",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "DET_RESOURCES_TYPE": "docker-container",
        "PYTHONPATH": "/opt/harness",
    }


@pytest.mark.parametrize(
    ("spec_env", "slot_ids", "key", "value"),
    [
        ({"PATH": "/custom"}, [0], "PATH", "/custom"),  # the experiment's PATH wins
        ({"PYTHONPATH": "/mine"}, [0], "PYTHONPATH", "/opt/harness:/mine"),
        ({}, [2], "CUDA_VISIBLE_DEVICES", ""),  # CPU slots see no GPU
        ({}, [2], "DET_SLOT_IDS", "[2]"),
        ({}, [], "DET_SLOT_IDS", "[]"),
        ({"DET_AGENT_ID": "spoofed"}, [0], "DET_AGENT_ID", "gpu-1"),
        ({"N": 3}, [0], "N", "3"),
    ],
)
def test_env_values(spec_env: dict, slot_ids: list[int], key: str, value: str) -> None:
    assert _env(spec_env, slot_ids)[key] == value


def test_env_drops_the_masters_private_variables() -> None:
    env = build_env({"allocation_id": "a.1", "env": {}}, base={"DET_JUPYTER_IDENTITY": "/x", "HOME": "/h"},
                    agent_id="ag", slot_types=SLOTS, harness=None, python_bin=None)
    assert "DET_JUPYTER_IDENTITY" not in env and env["HOME"] == "/h"


def test_env_without_harness_leaves_pythonpath_alone() -> None:
    env = _env({}, [0], base={"PYTHONPATH": "/x"}, harness=None, python_bin=None)
    assert env["PYTHONPATH"] == "/x"
    assert env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_env_path_keeps_the_system_directories() -> None:
    """An agent whose PATH names only directories its tasks' account cannot enter (a private
    venv, as a wheel installed under a 0700 home): a task's shell still finds mkdir and sh."""
    env = _env({}, [0], base={"PATH": "/root/venv/bin:/root/bin-shims"})
    assert env["PATH"] == ("/venv/bin:/root/venv/bin:/root/bin-shims:"
                           "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def test_env_rejects_foreign_slots() -> None:
    with pytest.raises(ValueError, match=r"slot_ids \[7\]"):
        _env({}, [0, 7])


@pytest.mark.parametrize(
    ("entrypoint", "argv"),
    [
        ("python3 train.py --x 1", ["sh", "-c", "python3 train.py --x 1"]),
        (["python3", "train.py"], ["python3", "train.py"]),
        (("a", 1), ["a", "1"]),
    ],
)
def test_entrypoint_argv(entrypoint, argv: list[str]) -> None:
    assert entrypoint_argv(entrypoint) == argv


def test_empty_entrypoint_list_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        entrypoint_argv([])


def test_isolated_argv_mounts_then_execs_as_the_task_in_its_workdir() -> None:
    steps = mount_plan(run_dir="/t/run", work_dir="/t/work dir",
                       mounts=[{"host_path": "/data", "container_path": "/determined_shared_fs"}],
                       hidden=[], needed=[], uid=0, gid=0, stage_dir="/t/run/.stage")
    ident = Identity(1234, 99, "alice", True, "linked")
    argv = isolated_argv(["unshare", "--pid"], ["python3", "it's.py"], steps=steps, identity=ident)
    assert argv[:4] == ["unshare", "--pid", "sh", "-c"]
    assert argv[4].splitlines() == [
        "set -e",
        "mount --rbind /t/run /run/determined",
        "mount --rbind '/t/work dir' /run/determined/workdir",
        "mount --rbind /data /determined_shared_fs",
        "rmdir /run/determined/.stage",
        "cd /run/determined/workdir",
        "exec setpriv --reuid=1234 --regid=99 --clear-groups --no-new-privs --inh-caps=-all "
        "--bounding-set=-all -- python3 'it'\"'\"'s.py'",
    ]


def _preamble_outcome(tmp_path, *, parent_alive: bool) -> tuple[int, str]:
    """Run the parent-lock lines of an isolated preamble with the lock as stdin, the way
    ``unshare`` passes it; ``parent_alive``: another open file of ours keeps holding it."""
    lock = str(tmp_path / "parent.lock")
    script = isolated_argv([], ["true"], steps=[], parent_lock=lock)[2].splitlines()
    assert script[:2] == ["set -e", "exec </dev/null"]
    # The check waits until the agent's own fd is closed, as in a real launch (the agent
    # closes it right after spawning, long before unshare's namespace reaches the check).
    spawned = tmp_path / "spawned"
    wait = f"while [ ! -e {spawned} ]; do sleep 0.01; done"
    check = "\n".join([*script[:2], wait, script[2], "echo through"])
    fd = open_parent_lock(lock)
    assert fd is not None
    holder = os.dup(fd) if parent_alive else None  # the same open file, as unshare's stdin is
    try:
        proc = subprocess.Popen(["sh", "-c", check], stdin=fd, stdout=subprocess.PIPE, text=True)
        os.close(fd)  # as the agent does once the task is spawned
        spawned.touch()
        out, _ = proc.communicate(timeout=30)
    finally:
        if holder is not None:
            os.close(holder)
    return proc.returncode, out


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) (util-linux) is not installed")
def test_isolated_preamble_leaves_when_its_parent_is_gone(tmp_path) -> None:
    assert _preamble_outcome(tmp_path, parent_alive=True) == (0, "through\n")
    # A fork by another thread of this test process holds a copy of the lock's fd until its
    # exec (O_CLOEXEC closes it only then), and a check in that instant sees a live parent (it
    # failed that way once in CI, under load). Three tries: a preamble that never leaves when
    # its parent is gone still fails every one of them.
    outcomes = []
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
        outcomes.append(_preamble_outcome(tmp_path / str(attempt), parent_alive=False))
        if outcomes[-1] == (137, ""):
            break
    assert outcomes[-1] == (137, ""), outcomes


def test_task_dir_and_info_files(tmp_path) -> None:
    task = make_task_dir(str(tmp_path), "1.a.1")
    write_info_files(task, {"cluster.json": {"master_url": "u"}, "raw.txt": "hi"})
    assert os.path.isdir(task.work)
    with open(os.path.join(task.info, "cluster.json")) as f:
        assert json.load(f) == {"master_url": "u"}
    with open(os.path.join(task.info, "raw.txt")) as f:
        assert f.read() == "hi"


def test_model_dir_snapshot_is_the_context_as_extracted(tmp_path) -> None:
    task = make_task_dir(str(tmp_path), "1.a.1")
    os.makedirs(os.path.join(task.work, "pkg"))
    for name in ("model_def.py", "pkg/util.py"):
        with open(os.path.join(task.work, name), "w") as f:
            f.write(name)
    snapshot_model_dir(task)
    # What the task writes later (a new file, a replaced one) does not reach the snapshot.
    with open(os.path.join(task.work, "data.bin"), "w") as f:
        f.write("big")
    os.replace(os.path.join(task.work, "pkg", "util.py"), os.path.join(task.work, "moved.py"))
    model = os.path.join(task.run, "train", "model")
    found = sorted(os.path.relpath(os.path.join(d, f), model) for d, _, fs in os.walk(model) for f in fs)
    assert found == ["model_def.py", "pkg/util.py"]


@pytest.mark.parametrize("name", ["../x.json", "a/b.json", ""])
def test_info_file_names_must_be_plain(tmp_path, name: str) -> None:
    task = make_task_dir(str(tmp_path), "1.a.1")
    with pytest.raises(LaunchError, match="plain file name"):
        write_info_files(task, {name: {}})


@pytest.mark.parametrize("allocation_id", ["", "..", "a/b"])
def test_bad_allocation_ids_are_refused(tmp_path, allocation_id: str) -> None:
    with pytest.raises(LaunchError, match="directory name"):
        make_task_dir(str(tmp_path), allocation_id)


def _tgz(members: dict[str, bytes]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def test_extract_context(tmp_path) -> None:
    extract_context(_tgz({"train.py": b"print(1)\n", "pkg/m.py": b""}), str(tmp_path))
    assert (tmp_path / "train.py").read_bytes() == b"print(1)\n"
    assert (tmp_path / "pkg" / "m.py").exists()


def test_extract_context_refuses_escapes(tmp_path) -> None:
    dest = tmp_path / "work"
    dest.mkdir()
    with pytest.raises(LaunchError, match="cannot extract"):
        extract_context(_tgz({"../escape.py": b"x"}), str(dest))
    assert not (tmp_path / "escape.py").exists()


def test_extract_context_keeps_absolute_names_inside(tmp_path) -> None:
    extract_context(_tgz({"/abs-det-agent-test.py": b"x"}), str(tmp_path))
    assert (tmp_path / "abs-det-agent-test.py").exists()
    assert not os.path.exists("/abs-det-agent-test.py")


def test_extract_context_refuses_non_base64(tmp_path) -> None:
    with pytest.raises(LaunchError, match="not base64"):
        extract_context("%%%", str(tmp_path))


def _raw(files: dict[str, bytes]) -> bytes:
    return base64.b64decode(_tgz(files))


def test_context_cache_keeps_contexts_by_digest(tmp_path) -> None:
    import hashlib

    from det_agent.runtime._taskdir import ContextCache

    cache = ContextCache(str(tmp_path / "cache"), keep=2)
    raws = [_raw({"train.py": f"print({i})\n".encode()}) for i in range(3)]
    digests = ["sha256:" + hashlib.sha256(r).hexdigest() for r in raws]
    assert not cache.copy_to(digests[0], str(tmp_path / "t0"))
    assert not cache.add(digests[1], raws[0]), "an archive that does not match its digest is refused"
    assert not cache.add("md5:abc", raws[0]) and not cache.add("sha256:../../etc", raws[0])
    assert not cache.add("sha256:" + hashlib.sha256(b"junk").hexdigest(), b"junk")
    assert cache.add(digests[0], raws[0])
    dest = tmp_path / "t1"
    dest.mkdir()
    assert cache.copy_to(digests[0], str(dest))
    (dest / "train.py").write_text("changed by the task")
    again = tmp_path / "t2"
    assert cache.copy_to(digests[0], str(again))
    assert (again / "train.py").read_text() == "print(0)\n", "a task's writes never reach the cache"
    for raw, digest in zip(raws[1:], digests[1:]):  # noqa: B905
        os.utime(tmp_path / "cache" / digests[0].split(":")[1], (1, 1))  # the oldest
        assert cache.add(digest, raw)
    kept = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert kept == sorted(d.split(":")[1] for d in digests[1:])
