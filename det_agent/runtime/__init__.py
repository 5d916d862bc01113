"""Runtimes: how the agent runs tasks.

:class:`Runtime` is the seam (a Docker runtime can be added beside the process runtime);
:class:`ProcessRuntime` runs tasks as local process groups; :func:`task_python_dir` checks the
interpreter (or virtual environment) tasks run with.
"""

from __future__ import annotations

from ._base import LogLine, OnExit, OnLog, Runtime
from ._launch import task_python_dir
from ._process import ProcessRuntime

__all__ = ["LogLine", "OnExit", "OnLog", "ProcessRuntime", "Runtime", "task_python_dir"]
