"""The bootstrap of a task that runs as a Kubernetes pod, with no det-agent on the node.

``python3 -m det_agent.pod SPEC_JSON`` does inside the pod what the process runtime does on an
agent's host before it starts a task (``runtime/_process.py``), then execs the task in its own
place, so the pod's exit code is the task's and its output is the pod log::

    {"spec": <TaskSpec wire dict, as ProcessRuntime.start receives it>,
     "agent_id": "<node name>", "slot_types": {"0": "cuda"}, "run_dir": "/run/determined"}

``run_dir`` (an emptyDir the master mounts, writable by the pod's uid) becomes the task's
``/run/determined``: ``info/`` (the spec's info files), ``home/`` (HOME), ``workdir/`` (the
context, and the working directory), ``train/model/`` (a TRIAL's context snapshot). The
environment is :func:`~.runtime._launch.build_env`'s over the allowlisted part of the pod's
own (:func:`~.runtime._isolation.inherited_env`: PATH, locale, LD_LIBRARY_PATH, NVIDIA_*…);
nothing else of the pod's environment reaches the task. The pod's securityContext decides
the uid: the bootstrap switches no user and mounts nothing.

A launch that fails prints one line to stderr, ``det-pod: <what failed>; <what to do>``,
and exits with the process runtime's code for it: 127 (entrypoint not found), 126 (not
executable), 1 (anything else: bad spec, context download, task directory), 2 (usage).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Mapping
from typing import Any, NoReturn

from . import wire
from .runtime._isolation import RUN_MOUNT, account_name, inherited_env
from .runtime._launch import build_env, entrypoint_argv, harness_dir, python_bin_dir
from .runtime._taskdir import (
    LaunchError,
    TaskDir,
    fetch_context,
    snapshot_model_dir,
    write_info_files,
)

#: The slot types a pod spec may name (``_devices.Slot.type``).
SLOT_TYPES = ("cpu", "cuda")
USAGE = "usage: python3 -m det_agent.pod SPEC_JSON"
_PREFIX = "det-pod: "


@dataclasses.dataclass(frozen=True)
class PodSpec:
    """The contents of the spec file: the task spec (wire dict, validated as an agent
    validates a ``start_task``), what an agent would know itself (its id, its slots' types),
    and where the task's ``/run/determined`` is."""

    spec: dict[str, Any]
    agent_id: str
    slot_types: dict[int, str]
    run_dir: str


def parse_pod_spec(raw: Any) -> PodSpec:
    """The spec file's JSON as a :class:`PodSpec`; ValueError naming the bad key."""
    if not isinstance(raw, dict):
        raise ValueError(f"the spec file must hold a JSON object, got {type(raw).__name__}")
    if "spec" not in raw:
        raise ValueError("the spec file has no 'spec' (the task spec)")
    spec = wire.TaskSpec.from_wire(raw["spec"]).to_wire()
    agent_id = raw.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError(f"'agent_id' must be a non-empty string, got {agent_id!r:.80}")
    types = raw.get("slot_types", {})
    if not isinstance(types, dict):
        raise ValueError(f"'slot_types' must map slot ids to types, got {types!r:.80}")
    slot_types: dict[int, str] = {}
    for key, kind in types.items():
        try:
            slot = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"'slot_types' key {key!r} is not a slot id (an integer)") from None
        if kind not in SLOT_TYPES:
            raise ValueError(f"'slot_types'[{key!r}] is {kind!r}, not one of {', '.join(SLOT_TYPES)}")
        slot_types[slot] = kind
    run_dir = raw.get("run_dir", RUN_MOUNT)
    if not isinstance(run_dir, str) or not os.path.isabs(run_dir):
        raise ValueError(f"'run_dir' must be an absolute path, got {run_dir!r:.80}")
    return PodSpec(spec, agent_id, slot_types, os.path.normpath(run_dir))


def read_pod_spec(path: str) -> PodSpec:
    """Read and parse the spec file; LaunchError saying what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise LaunchError(f"cannot read the spec file {path}: {e.strerror}; the master mounts it "
                          "from the task's Secret (check the pod's volumes)") from e
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise LaunchError(f"the spec file {path} is not JSON ({e}); the master wrote a bad "
                          "Secret, report this as a bug") from e
    try:
        return parse_pod_spec(raw)
    except ValueError as e:
        raise LaunchError(f"invalid task spec in {path}: {e}") from e


@dataclasses.dataclass(frozen=True)
class PodTaskDir(TaskDir):
    """A task directory whose ``run`` is ``root`` itself (the pod's ``/run/determined``) and
    whose ``work`` is ``run/workdir``, where an isolated process task sees it too; ``info``,
    ``home`` and the model snapshot follow from ``run`` as on an agent."""

    @property
    def run(self) -> str:
        return self.root

    @property
    def work(self) -> str:
        return os.path.join(self.root, "workdir")


def make_pod_task_dir(run_dir: str) -> PodTaskDir:
    """Lay out ``run_dir`` afresh: what a previous start of the same pod's container left
    there is removed, as the process runtime removes an old task directory. ``run_dir`` itself
    is the master's volume and stays as it is (its mode and owner are the kubelet's)."""
    task = PodTaskDir(run_dir)
    try:
        for path in (task.info, task.home, task.work, os.path.join(task.run, "train")):
            shutil.rmtree(path, ignore_errors=True)
        for path in (task.info, task.home, task.work):
            os.makedirs(path, mode=0o700)
    except OSError as e:
        raise LaunchError(
            f"cannot create the task directory in {run_dir}: {e.strerror} ({e.filename}); the "
            f"master must mount a volume there writable by uid {os.geteuid()} (an emptyDir, "
            "with the pod's fsGroup)") from e
    return task


@dataclasses.dataclass(frozen=True)
class Launch:
    """What to exec: the task's argv, its whole environment and its working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def prepare(pod: PodSpec, environ: Mapping[str, str]) -> Launch:
    """Prepare the task as ``ProcessRuntime.start`` does, in its order (task directory, info
    files, environment, context, model snapshot); ``environ``: the pod's own environment, of
    which only ``inherited_env`` reaches the task. LaunchError when a step fails."""
    spec = pod.spec
    task = make_pod_task_dir(pod.run_dir)
    try:
        write_info_files(task, spec.get("info_files") or {})
    except OSError as e:
        raise LaunchError(f"cannot write the info files into {task.info}: {e.strerror}; give "
                          "the pod's run_dir volume more room") from e
    try:
        env = build_env(
            spec,
            base=inherited_env(environ),
            agent_id=pod.agent_id,
            slot_types=pod.slot_types,
            harness=harness_dir(),
            python_bin=python_bin_dir(),
            home=task.home,
            user=account_name(os.geteuid()),
        )
        argv = entrypoint_argv(spec["entrypoint"])
    except (ValueError, TypeError) as e:
        raise LaunchError(f"invalid task spec: {e}") from e
    # One task per pod: nothing to share a context cache with.
    asyncio.run(fetch_context(spec, task.work, None))
    if spec.get("task_type") == "TRIAL":
        try:
            snapshot_model_dir(task)
        except OSError as e:
            raise LaunchError(f"cannot snapshot the model directory into {task.run}/train/model: "
                              f"{e}; give the pod's run_dir volume more room") from e
    return Launch(argv, env, task.work)


def exec_task(launch: Launch) -> NoReturn:
    """Replace this process with the task, in its working directory. OSError
    (FileNotFoundError, PermissionError…) when the exec fails; this process is then still the
    bootstrap."""
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # restore the defaults as subprocess.Popen(restore_signals=True) does for an agent's task.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    # An agent's task reads /dev/null; a pod's stdin is the kubelet's, usually /dev/null too.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.chdir(launch.cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(launch.argv[0], launch.argv, launch.env)


def exec_exit_code(e: OSError) -> int:
    """The process runtime's (and a shell's) status for an entrypoint that cannot be executed:
    127 when it is not found, 126 when it is found but cannot run."""
    return 127 if isinstance(e, (FileNotFoundError, NotADirectoryError)) else 126


def _fail(message: str, code: int) -> int:
    print(_PREFIX + message, file=sys.stderr, flush=True)
    return code


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Prepare and exec the task named by the spec file ``argv[0]``; returns (the exit status)
    only when that fails."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        return _fail(f"expected one argument, the spec file ({USAGE})", 2)
    try:
        launch = prepare(read_pod_spec(args[0]), os.environ if environ is None else environ)
    except LaunchError as e:
        return _fail(str(e), e.exit_code)
    except Exception as e:  # a bug: its traceback, then the one line
        traceback.print_exc()
        return _fail(f"preparing the task failed: {e!r}; report this as a bug", 1)
    try:
        exec_task(launch)
    except OSError as e:
        code = exec_exit_code(e)
        hint = ("check the entrypoint and the image's PATH" if code == 127
                else "check that it is an executable (with a #! line) in the image or the context")
        return _fail(f"cannot execute {launch.argv[:1]}: {e.strerror} (exit {code}); {hint}", code)


if __name__ == "__main__":
    sys.exit(main())
