"""Runtimes: how the agent runs tasks.

:class:`Runtime` is the seam; :class:`ProcessRuntime` runs tasks as local process groups,
:class:`DockerRuntime` runs tasks whose spec names a ``container`` in Docker containers, and
:class:`MixedRuntime` sends each spec to the one it needs; :func:`docker_probe` says whether
the Docker engine answers; :func:`refuse_container` ends an image task on an agent that runs
no containers; :func:`task_python_dir` checks the interpreter (or virtual
environment) tasks run with; :func:`prepare_pod_task` and :func:`exec_pod_task` prepare
and start a task inside its own Kubernetes pod (``det_agent.pod``), raising
:class:`LaunchError`.
"""

from __future__ import annotations

from ._base import LogLine, OnExit, OnLog, Runtime
from ._docker import DockerRuntime, docker_host
from ._docker import probe as docker_probe
from ._launch import task_python_dir
from ._mixed import MixedRuntime, refuse_container
from ._pod import PodLaunch, exec_pod_task, prepare_pod_task
from ._process import ProcessRuntime
from ._taskdir import LaunchError

__all__ = [
    "DockerRuntime", "LaunchError", "LogLine", "MixedRuntime", "OnExit", "OnLog", "PodLaunch",
    "ProcessRuntime", "Runtime", "docker_host", "docker_probe", "exec_pod_task",
    "prepare_pod_task", "refuse_container", "task_python_dir",
]
