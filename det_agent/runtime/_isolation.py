"""Who a task runs as, and what of the host its private mount namespace shows it.

Pure builders (the runtime executes their output): :func:`resolve_identity` picks the uid/gid
from the spec's ``run_as`` (the owner's linked agent user), the agent's default task account,
or the agent's own user; :func:`mount_plan` lists the mount steps that bind the task's own
directories at ``/run/determined`` and cover every hidden path (the master's data dir, the
agent's state) and every directory the task's uid could not traverse anyway with an empty
tmpfs, re-exposing only what the task needs beneath them (the interpreter, the harness, its
storage mounts). The steps run as shell lines before a cold task's exec
(:func:`plan_to_shell`) or as mount(2) calls in the warm launcher's fork.
"""

from __future__ import annotations

import dataclasses
import grp
import logging
import os
import pwd
import re
import shlex
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

#: Where the stock harness looks for its info files inside a task.
RUN_MOUNT = "/run/determined"
#: The task's working directory inside its namespace (as in Determined's containers).
WORKDIR_MOUNT = RUN_MOUNT + "/workdir"
#: The account tasks of unlinked users run as when the agent is root.
DEFAULT_TASK_USER = "det-task"
#: Options of the empty tmpfs laid over a hidden directory.
MASK_OPTIONS = "mode=0755,size=64k,nosuid,nodev"
_ACCOUNT = re.compile(r"[a-z_][a-z0-9_-]{0,31}")

#: The launcher's variables a task inherits; everything else of the agent's (or master's)
#: environment stays out. LC_* is matched as a prefix. OPENBLAS_* are set on some hosts
#: because older OpenBLAS builds compute wrong results there without them.
ENV_ALLOWLIST = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
})


def inherited_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the launcher's environment a task may see (see :data:`ENV_ALLOWLIST`)."""
    return {k: v for k, v in environ.items() if k in ENV_ALLOWLIST or k.startswith("LC_")}


@dataclasses.dataclass(frozen=True)
class Identity:
    """The uid/gid a task runs as; ``switch``: the agent must change to it (it is root and the
    identity is not its own)."""

    uid: int
    gid: int
    user: str | None
    switch: bool
    source: str  # "linked" | "default" | "agent"


def _run_as(spec: Mapping[str, Any]) -> tuple[int, int, str | None] | None:
    run_as = spec.get("run_as")
    if run_as is None:
        return None
    if not isinstance(run_as, Mapping):
        raise ValueError("spec.run_as must be a mapping with uid and gid")
    try:
        uid, gid = int(run_as["uid"]), int(run_as["gid"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"spec.run_as needs integer uid and gid ({e})") from e
    if not (0 <= uid < 2**31 and 0 <= gid < 2**31):
        raise ValueError(f"spec.run_as uid/gid out of range: {uid}/{gid}")
    user = run_as.get("user")
    return uid, gid, str(user) if user else None


def resolve_identity(
    spec: Mapping[str, Any], *, euid: int, egid: int, default_user: Callable[[], tuple[int, int, str]],
) -> Identity:
    """Who the task of ``spec`` runs as. An agent running as root runs a linked owner's tasks
    as the linked uid/gid and everyone else's as ``default_user()`` (the default account,
    created on first use); an agent that is not root runs every task as itself."""
    linked = _run_as(spec)
    if euid != 0:
        return Identity(euid, egid, None, False, "agent")
    if linked is not None:
        uid, gid, user = linked
        return Identity(uid, gid, user, uid != 0 or gid != 0, "linked")
    uid, gid, user = default_user()
    return Identity(uid, gid, user, True, "default")


def ensure_account(name: str) -> tuple[int, int, str]:
    """The uid/gid of the account ``name``, created (a system account with its own group, no
    home, no login shell) when it is missing. Raises RuntimeError saying what to do."""
    if not _ACCOUNT.fullmatch(name):
        raise RuntimeError(f"task user {name!r} is not a valid account name")
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid, name
    except KeyError:
        pass
    cmd = ["useradd", "--system", "--user-group", "--no-create-home",
           "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cannot create the task account {name!r} ({e}); create it with "
                           f"`{' '.join(cmd)}` or pass det-agent --task-user") from e
    if done.returncode != 0 and "already exists" not in done.stderr:
        raise RuntimeError(f"cannot create the task account {name!r}: {done.stderr.strip()}; create "
                           f"it with `{' '.join(cmd)}` or pass det-agent --task-user")
    entry = pwd.getpwnam(name)
    log.info("created the task account %s (uid %d, gid %d)", name, entry.pw_uid, entry.pw_gid)
    return entry.pw_uid, entry.pw_gid, name


def account_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


StatFn = Callable[[str], os.stat_result]


def _traversable(st: os.stat_result, uid: int, gid: int) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocking_ancestor(path: str, uid: int, gid: int, stat_fn: StatFn = os.stat) -> str | None:
    """The highest directory on the way to ``path`` (``path`` included) that ``uid``/``gid``
    cannot traverse, or None when it reaches it."""
    parts = os.path.abspath(path).split(os.sep)[1:]
    current = ""
    for part in parts:
        current = f"{current}/{part}"
        try:
            st = stat_fn(current)
        except OSError:
            return None  # a missing path is the task's problem, reported when it uses it
        if stat.S_ISDIR(st.st_mode) and not _traversable(st, uid, gid):
            return current
    return None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that are not beneath another of them, sorted."""
    ordered = sorted({os.path.normpath(p) for p in paths}, key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    for p in ordered:
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return sorted(kept)


Step = tuple[str, ...]


def mount_plan(
    *,
    run_dir: str,
    work_dir: str,
    mounts: Sequence[Mapping[str, str]],
    hidden: Iterable[str],
    needed: Iterable[str],
    uid: int,
    gid: int,
    stage_dir: str,
    stat_fn: StatFn = os.stat,
) -> list[Step]:
    """The mount steps of a task's namespace, in order. Each step is one of
    ``("bind", src, dst)``, ``("tmpfs", dst)``, ``("mkdir", path)``, ``("move", src, dst)``,
    ``("rmdir", path)``.

    ``hidden``: host paths the task must not see: directories are covered by an empty tmpfs,
    files by /dev/null.
    ``needed``: host paths the task must reach (interpreter, harness); with each mount's
    host_path, they stay reachable at their own paths even beneath a hidden directory, and any
    directory above them that ``uid`` could not traverse is covered too (so that, e.g., an
    interpreter under root's 0700 home runs while the rest of that home stays unseen).
    ``stage_dir``: an empty directory of the task's run dir (``<run_dir>/.stage``) where the
    needed paths wait while the tmpfs goes over their parents; it is removed after.
    """
    steps: list[Step] = [("bind", run_dir, RUN_MOUNT), ("bind", work_dir, WORKDIR_MOUNT)]
    for m in mounts:
        steps.append(("bind", m["host_path"], m["container_path"]))
    exposed = _outermost([*needed, *(m["host_path"] for m in mounts)])
    masks, files = [], []
    for h in hidden:
        try:
            mode = stat_fn(h).st_mode if os.path.isabs(h) else None
        except OSError:
            continue  # nothing there to hide
        if mode is not None:
            (masks if stat.S_ISDIR(mode) else files).append(os.path.normpath(h))
    if uid != 0:
        for path in exposed:
            block = blocking_ancestor(path, uid, gid, stat_fn)
            if block is not None:
                masks.append(block)
    # Never a directory holding the task's own binds (a blocked "/run" would hide them).
    masks = [m for m in _outermost(masks) if not _under(RUN_MOUNT, m)]
    keep = [(e, m) for m in masks for e in exposed if _under(e, m)]
    staged = f"{RUN_MOUNT}/{os.path.basename(stage_dir)}"
    for i, (path, _) in enumerate(keep):
        steps.append(("mkdir", f"{staged}/{i}"))
        steps.append(("bind", path, f"{staged}/{i}"))
    for m in masks:
        steps.append(("tmpfs", m))
    for f in files:  # a hidden file (an agent's token file) reads as empty
        if not any(_under(f, m) for m in masks):
            steps.append(("bind", "/dev/null", f))
    for i, (path, _) in enumerate(keep):
        steps.append(("mkdir", path))
        steps.append(("move", f"{staged}/{i}", path))
        steps.append(("rmdir", f"{staged}/{i}"))
    steps.append(("rmdir", staged))
    return steps


def plan_to_shell(steps: Sequence[Step]) -> list[str]:
    """The steps as shell lines (util-linux mount)."""
    q = shlex.quote
    lines = []
    for step in steps:
        op, *args = step
        if op == "bind":
            lines.append(f"mount --rbind {q(args[0])} {q(args[1])}")
        elif op == "tmpfs":
            lines.append(f"mount -t tmpfs -o {MASK_OPTIONS} det-hidden {q(args[0])}")
        elif op == "mkdir":
            lines.append(f"mkdir -p {q(args[0])}")
        elif op == "move":
            lines.append(f"mount --move {q(args[0])} {q(args[1])}")
        elif op == "rmdir":
            lines.append(f"rmdir {q(args[0])}")
        else:
            raise ValueError(f"unknown mount step {op!r}")
    return lines


def drop_privileges_argv(identity: Identity | None) -> list[str]:
    """The ``setpriv`` prefix that makes the task's exec run as ``identity`` with no
    capabilities and no way to gain privileges (setuid binaries included)."""
    argv = ["setpriv"]
    if identity is not None and identity.switch:
        argv += [f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups"]
    return [*argv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
