"""Per-slot GPU statistics through NVML, sampled for the master's ``slot_stats`` frames.

The agent calls :meth:`GpuStatsSampler.sample` from an executor thread (NVML calls block), so
the sampler guards its NVML session with a lock. Any NVML failure means "no figures for that
slot this time", never an error: a GPU that fell off the bus must not take the agent down.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import _wire_check as check
from ._devices import Slot, _import_pynvml

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SlotStats:
    """One GPU slot's figures at one moment: utilization in percent, memory in bytes."""

    id: int
    gpu_util: int
    mem_used: int
    mem_total: int

    def to_wire(self) -> dict[str, Any]:
        """The protocol's ``{"id", "gpu_util", "mem_used", "mem_total"}`` object."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, raw: Any) -> SlotStats:
        """One slot of a ``slot_stats`` frame; ValueError naming the key when it is not one."""
        what = "a slot_stats frame's slot"
        d = check.obj(raw, what)
        return cls(*(check.integer(d, key, what) for key in ("id", "gpu_util", "mem_used", "mem_total")))


class GpuStatsSampler:
    """Reads utilization and memory of the ``cuda`` slots among ``slots``; CPU slots are skipped.

    Slot ids are NVML device indices (as :func:`~det_agent.detect_slots` numbers them). ``nvml``
    replaces the ``pynvml`` module (for tests); by default it is imported on the first sample.
    NVML is initialised on the first sample and shut down by :meth:`close`; when it cannot be
    initialised, the next sample tries again (a driver may be reloaded under a running agent).
    """

    def __init__(self, slots: Sequence[Slot], *, nvml: ModuleType | None = None) -> None:
        self.slot_ids = tuple(s.id for s in slots if s.type == "cuda")
        self._module = nvml
        self._lock = threading.Lock()
        self._initialised = False

    def sample(self) -> list[SlotStats]:
        """The current figures of every GPU slot NVML answers for, in slot order. Blocks."""
        if not self.slot_ids:
            return []
        with self._lock:
            nvml = self._init()
            if nvml is None:
                return []
            stats = []
            for slot_id in self.slot_ids:
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(slot_id)
                    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
                    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                except nvml.NVMLError as e:
                    log.debug("NVML query for GPU %d failed: %s", slot_id, e)
                    continue
                stats.append(SlotStats(slot_id, int(rates.gpu), int(memory.used), int(memory.total)))
            return stats

    def close(self) -> None:
        """Shut NVML down if a sample started it; a later sample starts it again."""
        with self._lock:
            if not self._initialised or self._module is None:
                return
            self._initialised = False
            try:
                self._module.nvmlShutdown()
            except self._module.NVMLError as e:
                log.debug("NVML shutdown failed: %s", e)

    def _init(self) -> ModuleType | None:
        if self._initialised:
            return self._module
        if self._module is None:
            self._module = _import_pynvml()
            if self._module is None:
                return None
        try:
            self._module.nvmlInit()
        except self._module.NVMLError as e:
            log.debug("NVML unavailable (%s); no GPU stats this time", e)
            return None
        self._initialised = True
        return self._module


def sampler_for(
    slots: Sequence[Slot], stats_interval: float, sampler: GpuStatsSampler | None = None
) -> GpuStatsSampler | None:
    """The sampler an agent with ``slots`` runs: ``sampler`` or a new NVML one, or None when
    stats are off (``stats_interval`` 0) or no slot is a GPU (CPU slots send no stats)."""
    if stats_interval == 0 or not any(s.type == "cuda" for s in slots):
        return None
    return sampler if sampler is not None else GpuStatsSampler(slots)
