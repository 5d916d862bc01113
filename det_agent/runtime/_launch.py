"""Pure builders for a task's environment and command line, and the isolation probe."""

from __future__ import annotations

import ctypes
import fcntl
import functools
import importlib.util
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._isolation import (
    RUN_MOUNT,
    WORKDIR_MOUNT,
    Identity,
    Step,
    drop_privileges_argv,
    plan_to_shell,
)

log = logging.getLogger(__name__)


_UNSHARE = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
]
_PR_SET_PDEATHSIG = 1


@functools.cache
def harness_dir() -> str | None:
    """A directory holding only the ``det_harness`` package (found without importing it;
    looked up once per agent process, not per task).

    Tasks may run another interpreter (a user's venv), so their PYTHONPATH must gain the
    harness and nothing else: when the package lives in a site-packages directory, a private
    directory with a link to it is used instead of the whole site-packages.
    """
    try:
        spec = importlib.util.find_spec("det_harness")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        package = os.path.abspath(list(spec.submodule_search_locations)[0])
    else:
        # A source checkout keeps the harness beside the agent package in `harness/`.
        checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        package = os.path.join(checkout, "harness", "det_harness")
        if not os.path.isfile(os.path.join(package, "__init__.py")):
            return None
    parent = os.path.dirname(package)
    if set(os.listdir(parent)) <= {"det_harness", "__pycache__"}:
        return parent
    private = os.path.join(tempfile.gettempdir(), f"det-agent-harness-{os.getuid()}")
    link = os.path.join(private, "det_harness")
    try:
        # Readable by all (tasks may run as other users), writable by this user only.
        os.makedirs(private, mode=0o755, exist_ok=True)
        os.chmod(private, 0o755)
        if os.path.realpath(link) != os.path.realpath(package):
            tmp = f"{link}.{os.getpid()}"
            os.symlink(package, tmp)
            os.replace(tmp, link)
    except OSError:
        return parent  # better the whole directory than no harness
    return private


def _prepend(path: str, current: str | None) -> str:
    return f"{path}{os.pathsep}{current}" if current else path


#: Appended to a task's PATH where missing: the agent's own PATH may name only directories the
#: task's account cannot enter (a private virtual environment, a home directory), and a task's
#: shell must still find ``mkdir`` and ``sh``.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def with_system_path(current: str | None) -> str:
    """``current`` with each of SYSTEM_PATH it lacks appended, in order."""
    parts = [p for p in (current or "").split(os.pathsep) if p]
    return os.pathsep.join(parts + [d for d in SYSTEM_PATH if d not in parts])


#: Variables of the agent's own process that its tasks must not inherit: an embedded agent
#: runs inside the master, whose kernels' credentials file is named here.
PRIVATE_ENV = ("DET_JUPYTER_IDENTITY",)


def build_env(
    spec: Mapping[str, Any],
    *,
    base: Mapping[str, str],
    agent_id: str,
    slot_types: Mapping[int, str],
    harness: str | None,
    python_bin: str | None,
    home: str | None = None,
    user: str | None = None,
    resources_type: str = "docker-container",
) -> dict[str, str]:
    """The task's environment.

    Layers, later winning: ``base`` (the allowlisted part of the agent's environment, see
    :func:`~._isolation.inherited_env`) with ``python_bin`` prepended to PATH (so ``python3`` is
    the agent's interpreter) and the system directories appended where missing
    (``SYSTEM_PATH``), and HOME/USER/LOGNAME of the task's own identity, then
    ``spec["env"]`` (the task's DET_* variables and its config's ``environment_variables``),
    then what only the
    agent knows (DET_AGENT_ID, DET_CONTAINER_ID, DET_SLOT_IDS, CUDA_VISIBLE_DEVICES,
    DET_RESOURCES_TYPE) and ``harness`` prepended to PYTHONPATH. ``slot_types`` maps each slot
    id of this agent to "cuda" or "cpu". ``resources_type``: 0.38.1's DET_RESOURCES_TYPE, what
    the stock ``prep_container`` picks its rendezvous by (``k8s-job`` in a pod).
    """
    env = dict(base)
    for key in PRIVATE_ENV:
        env.pop(key, None)
    if python_bin:
        env["PATH"] = _prepend(python_bin, env.get("PATH"))
    env["PATH"] = with_system_path(env.get("PATH"))
    if home:
        env["HOME"] = home
    if user:
        env["USER"] = env["LOGNAME"] = user
    env.update({str(k): str(v) for k, v in (spec.get("env") or {}).items()})
    slot_ids = [int(s) for s in spec.get("slot_ids") or []]
    unknown = [s for s in slot_ids if s not in slot_types]
    if unknown:
        raise ValueError(
            f"spec.slot_ids {unknown} are not slots of this agent ({sorted(slot_types)})"
        )
    env["DET_AGENT_ID"] = agent_id
    env["DET_CONTAINER_ID"] = str(spec["allocation_id"])
    env["DET_SLOT_IDS"] = json.dumps(slot_ids, separators=(",", ":"))
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(s) for s in slot_ids if slot_types[s] == "cuda")
    env["DET_RESOURCES_TYPE"] = resources_type
    if harness:
        env["PYTHONPATH"] = _prepend(harness, env.get("PYTHONPATH"))
    return env


def entrypoint_argv(entrypoint: str | Sequence[str]) -> list[str]:
    """A string entrypoint runs through ``sh -c``; a list is the argv itself."""
    if isinstance(entrypoint, str):
        return ["sh", "-c", entrypoint]
    argv = [str(a) for a in entrypoint]
    if not argv:
        raise ValueError("spec.entrypoint is an empty list; give a command to run")
    return argv


def isolated_argv(
    unshare: Sequence[str],
    entry: Sequence[str],
    *,
    steps: Sequence[Step],
    identity: Identity | None = None,
    parent_lock: str | None = None,
) -> list[str]:
    """Wrap ``entry`` so it runs in a private mount + pid namespace laid out by ``steps``
    (:func:`~._isolation.mount_plan`), as ``identity`` with no capabilities.

    The ``sh`` preamble runs the mount steps, then execs the entrypoint through ``setpriv``
    in /run/determined/workdir (as pid 1 of the namespace, so every process the task leaves
    behind dies with it).

    ``parent_lock``: a file whose shared flock ``unshare`` holds through its stdin (see
    :func:`open_parent_lock`). ``unshare --kill-child`` arms the namespace's pid 1 to die with
    ``unshare`` only after forking it, and (before util-linux 2.39) checks nothing: were
    ``unshare`` killed in between (the agent died), the task would outlive it. The preamble
    runs after that arming; it lets go of its own copy of stdin and leaves at once if it can
    then take the lock exclusively, i.e. ``unshare`` is gone.
    """
    lines = ["set -e"]
    if parent_lock:
        lines.append("exec </dev/null")
        lines.append(
            f"if flock -n -x {shlex.quote(parent_lock)} true 2>/dev/null; then exit 137; fi"
        )
    lines.extend(plan_to_shell(steps))
    lines.append(f"cd {WORKDIR_MOUNT}")
    lines.append("exec " + " ".join(shlex.quote(a) for a in [*drop_privileges_argv(identity), *entry]))
    return [*unshare, "sh", "-c", "\n".join(lines)]


def probe_isolation() -> list[str] | None:
    """The ``unshare`` prefix that works on this host, or None when namespaces are unavailable."""
    try:
        os.makedirs(RUN_MOUNT, exist_ok=True)
    except OSError as e:
        log.debug("cannot create %s: %s", RUN_MOUNT, e)
        return None
    candidates = [_UNSHARE]
    if os.geteuid() != 0:
        candidates = [[*_UNSHARE, "--map-root-user"], _UNSHARE]
    for prefix in candidates:
        try:
            done = subprocess.run(
                [*prefix, "true"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            log.debug("isolation probe %s failed: %s", prefix, e)
            continue
        if done.returncode == 0:
            return list(prefix)
        log.debug("isolation probe %s exited %d: %s", prefix, done.returncode, done.stderr)
    return None


def open_parent_lock(path: str) -> int | None:
    """A read-only fd of ``path`` holding a shared flock, to be an isolated task's stdin (see
    :func:`isolated_argv`); None where the file cannot be locked (the check is then skipped).
    The lock lasts while any process keeps this open file: the agent closes its fd once the
    task is spawned, leaving ``unshare`` the holder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        log.debug("no parent lock at %s: %s", path, e)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError as e:
        log.debug("no parent lock at %s: %s", path, e)
        os.close(fd)
        return None
    return fd


def _load_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def make_preexec(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child get SIGKILL when the agent process dies."""

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The agent may have died between fork and prctl; then nobody would kill us later.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def python_bin_dir() -> str:
    """The directory of the agent's interpreter, put first on the task's PATH."""
    return os.path.dirname(sys.executable)


def task_python_dir(path: str) -> str:
    """The bin directory of a Python environment named for tasks (``--task-python``): a
    virtual environment (``/opt/venv``), its bin directory, or an interpreter in it. Its
    ``python3`` is what a task's ``python3 train.py`` runs. ValueError naming what is missing."""
    path = os.path.abspath(os.path.expanduser(path))
    candidates = [path] if os.path.isdir(path) else [os.path.dirname(path)] if os.path.isfile(path) else []
    if candidates and os.path.isdir(os.path.join(path, "bin")):
        candidates.insert(0, os.path.join(path, "bin"))
    for bin_dir in candidates:
        exe = os.path.join(bin_dir, "python3")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return bin_dir
    raise ValueError(f"--task-python {path}: no python3 there (give a virtual environment, its bin "
                     "directory or its python3, e.g. /opt/venv)")
