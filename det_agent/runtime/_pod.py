"""A task prepared inside its own Kubernetes pod, then exec'd in the bootstrap's place.

What :meth:`ProcessRuntime.start` does before it spawns a task, in its order, with the task's
``/run/determined`` being the pod's ``run_dir`` volume itself (:class:`PodTaskDir`): the task
directory, the info files, the environment (:func:`~._launch.build_env` over the allowlisted
part of the pod's own, :func:`~._isolation.inherited_env`), the context, a TRIAL's model
snapshot. No user switch and no mount: the pod's securityContext and volumes do that. The CLI
around it is :mod:`det_agent.pod`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from ._isolation import RUN_MOUNT, account_name, inherited_env
from ._launch import build_env, entrypoint_argv, harness_dir, python_bin_dir
from ._taskdir import LaunchError, TaskDir, fetch_context, snapshot_model_dir, write_info_files

#: 0.38.1's DET_RESOURCES_TYPE of a pod: its ``prep_container`` then meets the gang's other pods
#: through the master's all-gather and reports the pod's IP as the proxy address.
RESOURCES_TYPE = "k8s-job"
#: Variables of the pod's own environment the task gets too (the master's pod manifest sets
#: them: the pod's IP from the downward API).
POD_ENV = ("DET_KUBERNETES_POD_IP",)


@dataclasses.dataclass(frozen=True)
class PodTaskDir(TaskDir):
    """A task directory whose ``run`` is ``root`` itself (the pod's ``/run/determined``) and
    whose ``work`` is ``run/workdir``, where an isolated process task sees it too; ``info``,
    ``home`` and the model snapshot (``run/train/model``) follow from ``run`` as on an agent."""

    @property
    def run(self) -> str:
        return self.root

    @property
    def work(self) -> str:
        return os.path.join(self.root, "workdir")


def make_pod_task_dir(run_dir: str) -> PodTaskDir:
    """Lay out ``run_dir`` afresh: what an earlier start of the pod's container left there is
    removed, as the process runtime removes an old task directory. ``run_dir`` itself is the
    master's volume and keeps its mode and owner (the kubelet's, which this uid cannot change)."""
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
class PodLaunch:
    """What to exec: the task's argv, its whole environment and its working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def prepare_pod_task(
    spec: Mapping[str, Any],
    *,
    agent_id: str,
    slot_types: Mapping[int, str],
    environ: Mapping[str, str],
    run_dir: str | None = None,
) -> PodLaunch:
    """Prepare the task of ``spec`` (a TaskSpec wire dict) under ``run_dir`` (default
    ``/run/determined``). ``environ``: the pod's own environment, of which only
    ``inherited_env`` reaches the task. LaunchError (message and exit code) when a step fails."""
    if not spec.get("allocation_id"):
        raise LaunchError("invalid task spec: allocation_id is missing")
    if "entrypoint" not in spec:
        raise LaunchError("invalid task spec: entrypoint is missing")
    task = make_pod_task_dir(os.path.abspath(run_dir or RUN_MOUNT))
    try:
        write_info_files(task, spec.get("info_files") or {})
    except OSError as e:
        raise LaunchError(f"cannot write the info files into {task.info}: {e.strerror}; give "
                          "the pod's run_dir volume more room") from e
    try:
        env = build_env(
            spec,
            base={**inherited_env(environ), **{k: environ[k] for k in POD_ENV if k in environ}},
            agent_id=agent_id,
            slot_types=slot_types,
            harness=harness_dir(),
            python_bin=python_bin_dir(),
            home=task.home,
            user=account_name(os.geteuid()),
            resources_type=RESOURCES_TYPE,
        )
        argv = entrypoint_argv(spec["entrypoint"])
    except (ValueError, TypeError) as e:
        raise LaunchError(f"invalid task spec: {e}") from e
    # One task per pod: no other task to share a context cache with.
    asyncio.run(fetch_context(spec, task.work, None))
    if spec.get("task_type") == "TRIAL":
        try:
            snapshot_model_dir(task)
        except OSError as e:
            raise LaunchError(f"cannot snapshot the model directory into {task.run}/train/model: "
                              f"{e}; give the pod's run_dir volume more room") from e
    return PodLaunch(argv, env, task.work)


def exec_exit_code(e: OSError) -> int:
    """The process runtime's (and a shell's) status for an entrypoint that cannot be executed:
    127 when it is not found, 126 when it is found but cannot run."""
    return 127 if isinstance(e, (FileNotFoundError, NotADirectoryError)) else 126


def exec_pod_task(launch: PodLaunch) -> NoReturn:
    """Replace this process with the task, in its working directory, its stdin /dev/null.
    LaunchError (exit code 127 or 126) when the exec fails; this process is then still the
    bootstrap."""
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # restore the defaults as subprocess.Popen(restore_signals=True) does for an agent's task.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.chdir(launch.cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(launch.argv[0], launch.argv, launch.env)
    except OSError as e:
        code = exec_exit_code(e)
        hint = ("check the entrypoint and the image's PATH" if code == 127
                else "check that it is an executable (with a #! line) in the image or the context")
        raise LaunchError(f"cannot execute {launch.argv[:1]}: {e.strerror} (exit {code}); {hint}",
                          exit_code=code) from e
