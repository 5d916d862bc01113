"""det-agent: runs det-jupyter tasks on a host's GPUs (or CPUs).

Public surface: :class:`Agent` (the connection to the master), :func:`detect_slots` and
:class:`Slot` (devices), :class:`GpuStatsSampler` and :class:`SlotStats` (GPU figures),
:func:`detect_address` (what the agent tells the master it is reached at), :class:`LocalLink`
(an agent inside its master's process), and the runtimes in :mod:`det_agent.runtime`. The
master↔agent protocol is fixed in docs/internals.md; its task spec and frames are the typed
records of :mod:`det_agent.wire`, which the master uses too. This package never imports det_jupyter.
"""

from __future__ import annotations

from ._address import detect_address
from ._agent import Agent
from ._devices import Slot, detect_slots, gpu_utilization
from ._link import LocalLink
from ._stats import GpuStatsSampler, SlotStats
from ._version import __version__
from .runtime import LogLine, ProcessRuntime, Runtime

__all__ = [
    "Agent",
    "GpuStatsSampler",
    "LocalLink",
    "LogLine",
    "ProcessRuntime",
    "Runtime",
    "Slot",
    "SlotStats",
    "__version__",
    "detect_address",
    "detect_slots",
    "gpu_utilization",
]
