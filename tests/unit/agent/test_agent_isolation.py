"""Pure builders of task isolation: the inherited environment, who a task runs as, and the
mount steps that hide the host from it."""

from __future__ import annotations

import os
import stat

import pytest

from det_agent.runtime._isolation import (
    Identity,
    blocking_ancestor,
    inherited_env,
    mount_plan,
    plan_to_shell,
    resolve_identity,
)


def test_only_allowlisted_variables_are_inherited() -> None:
    environ = {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC",
        "OPENBLAS_CORETYPE": "Haswell",
        "DET_ADMIN_PASSWORD": "Secret-1", "DET_AGENT_TOKEN": "tok", "DET_DB_URL": "postgresql://u:p@h/d",
        "DET_JUPYTER_IDENTITY": "/x", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "k", "PYTHONPATH": "/m",
        "JUPYTER_TOKEN": "t",
    }
    assert inherited_env(environ) == {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "OPENBLAS_CORETYPE": "Haswell",
    }


def _default() -> tuple[int, int, str]:
    return 998, 997, "det-task"


@pytest.mark.parametrize(
    ("spec", "euid", "expected"),
    [
        ({}, 0, Identity(998, 997, "det-task", True, "default")),
        ({"run_as": {"uid": 1500, "gid": 1600, "user": "alice"}}, 0, Identity(1500, 1600, "alice", True, "linked")),
        # An agent that is not root runs everything as itself, linked or not.
        ({"run_as": {"uid": 1500, "gid": 1600}}, 1000, Identity(1000, 1000, None, False, "agent")),
        ({}, 1000, Identity(1000, 1000, None, False, "agent")),
        # An admin may link a user to root explicitly; then nothing changes.
        ({"run_as": {"uid": 0, "gid": 0}}, 0, Identity(0, 0, None, False, "linked")),
    ],
)
def test_resolve_identity(spec: dict, euid: int, expected: Identity) -> None:
    assert resolve_identity(spec, euid=euid, egid=euid, default_user=_default) == expected


@pytest.mark.parametrize("run_as", [{"uid": -1, "gid": 0}, {"uid": "x", "gid": 1}, {"gid": 1}, [1, 2], {"uid": 2**31, "gid": 0}])
def test_bad_run_as_is_an_invalid_spec(run_as: object) -> None:
    with pytest.raises(ValueError, match="run_as"):
        resolve_identity({"run_as": run_as}, euid=0, egid=0, default_user=_default)


def _fake_stat(modes: dict[str, tuple[int, int, int]], files: tuple[str, ...] = (), missing: tuple[str, ...] = ()):
    """A stat function over a made-up tree: path -> (mode bits, uid, gid); ``files`` are
    regular files, ``missing`` do not exist; anything else is a world-traversable root-owned
    directory."""

    def fn(path: str) -> os.stat_result:
        if path in missing:
            raise FileNotFoundError(path)
        mode, uid, gid = modes.get(path, (0o600 if path in files else 0o755, 0, 0))
        kind = stat.S_IFREG if path in files else stat.S_IFDIR
        return os.stat_result((kind | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))

    return fn


def test_blocking_ancestor_finds_the_highest_untraversable_directory() -> None:
    fn = _fake_stat({"/root": (0o700, 0, 0), "/root/.pyenv": (0o700, 0, 0)})
    assert blocking_ancestor("/root/.pyenv/versions/3.11", 998, 997, fn) == "/root"
    assert blocking_ancestor("/usr/lib/python3", 998, 997, fn) is None
    assert blocking_ancestor("/root/.pyenv", 0, 0, fn) is None  # root traverses anything
    # Owner and group bits count for their owner and group only.
    fn = _fake_stat({"/home/bob": (0o710, 1000, 997)})
    assert blocking_ancestor("/home/bob/venv", 998, 997, fn) is None
    assert blocking_ancestor("/home/bob/venv", 998, 10, fn) == "/home/bob"
    assert blocking_ancestor("/home/bob/venv", 1000, 10, fn) is None


def test_plan_hides_data_dirs_and_exposes_only_what_the_task_needs() -> None:
    fn = _fake_stat({"/root": (0o700, 0, 0)})
    steps = mount_plan(
        run_dir="/d/agent/tasks/a/run", work_dir="/d/agent/tasks/a/work",
        mounts=[{"host_path": "/d/checkpoints", "container_path": "/determined_shared_fs"}],
        hidden=["/d", "/d/agent", "/root/.local/share/jupyter/runtime"],
        needed=["/root/.pyenv/versions/3.11", "/root/.pyenv/versions/3.11/bin", "/work/venv"],
        uid=998, gid=997, stage_dir="/d/agent/tasks/a/run/.stage", stat_fn=fn,
    )
    assert plan_to_shell(steps) == [
        "mount --rbind /d/agent/tasks/a/run /run/determined",
        "mount --rbind /d/agent/tasks/a/work /run/determined/workdir",
        "mount --rbind /d/checkpoints /determined_shared_fs",
        # Checkpoints stay at their host path too (DET_SHARED_FS_HOST_PATH), the interpreter
        # under root's home stays runnable; both wait in the stage while their parents go.
        "mkdir -p /run/determined/.stage/0",
        "mount --rbind /d/checkpoints /run/determined/.stage/0",
        "mkdir -p /run/determined/.stage/1",
        "mount --rbind /root/.pyenv/versions/3.11 /run/determined/.stage/1",
        "mount -t tmpfs -o mode=0755,size=64k,nosuid,nodev det-hidden /d",
        "mount -t tmpfs -o mode=0755,size=64k,nosuid,nodev det-hidden /root",
        "mkdir -p /d/checkpoints",
        "mount --move /run/determined/.stage/0 /d/checkpoints",
        "rmdir /run/determined/.stage/0",
        "mkdir -p /root/.pyenv/versions/3.11",
        "mount --move /run/determined/.stage/1 /root/.pyenv/versions/3.11",
        "rmdir /run/determined/.stage/1",
        "rmdir /run/determined/.stage",
    ]


def test_plan_for_a_task_running_as_the_agents_own_root_masks_only_hidden_paths() -> None:
    fn = _fake_stat({"/root": (0o700, 0, 0)})
    steps = mount_plan(run_dir="/r", work_dir="/w", mounts=[], hidden=["/data"],
                       needed=["/root/venv"], uid=0, gid=0, stage_dir="/r/.stage", stat_fn=fn)
    assert ("tmpfs", "/data") in steps and ("tmpfs", "/root") not in steps


def test_hidden_files_read_as_empty_and_missing_paths_are_skipped() -> None:
    fn = _fake_stat({}, files=("/etc/det-agent/token", "/data/token"), missing=("/gone",))
    steps = mount_plan(run_dir="/r", work_dir="/w", mounts=[], hidden=["/etc/det-agent/token", "/data/token",
                                                                          "/data", "/gone"],
                       needed=[], uid=998, gid=997, stage_dir="/r/.stage", stat_fn=fn)
    assert ("bind", "/dev/null", "/etc/det-agent/token") in steps
    assert ("bind", "/dev/null", "/data/token") not in steps  # under a covered directory already
    assert ("tmpfs", "/data") in steps and not any("/gone" in s for step in steps for s in step)
