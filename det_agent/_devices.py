"""Slot detection: GPUs through NVML, otherwise CPU slots.

NVML missing is the normal case on laptops and CPU hosts, so every NVML failure degrades to
"no GPUs" with a debug log rather than an error.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from types import ModuleType
from typing import Any

from . import _wire_check as check

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Slot:
    """One schedulable device on this agent, as sent in the ``hello`` frame."""

    id: int
    type: str  # "cuda" | "cpu"
    name: str
    uuid: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The slot as the protocol's ``{"id", "type", "name", "uuid"}`` object."""
        return {"id": self.id, "type": self.type, "name": self.name, "uuid": self.uuid}

    @classmethod
    def from_wire(cls, raw: Any) -> Slot:
        """A slot of a ``hello`` frame; ValueError naming the key when it is not one."""
        what = "a hello frame's slot"
        d = check.obj(raw, what)
        return cls(check.integer(d, "id", what), check.string(d, "type", what),
                   check.string(d, "name", what), check.opt_string(d, "uuid", what))


def _import_pynvml() -> ModuleType | None:
    try:
        with warnings.catch_warnings():
            # The `pynvml` wheel warns that it is deprecated in favour of nvidia-ml-py; both
            # provide the same module, and the warning is noise for agent users.
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        log.debug("pynvml is not installed; assuming no GPUs")
        return None
    return pynvml


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes, newer ones str.
    return value.decode() if isinstance(value, bytes) else value


def _cpu_slots(cpu_slots: int | None) -> list[Slot]:
    count = cpu_slots if cpu_slots is not None else (os.cpu_count() or 1)
    if count < 1:
        raise ValueError(f"cpu_slots must be at least 1, got {count}")
    return [Slot(id=i, type="cpu", name="cpu") for i in range(count)]


def _gpu_slots(nvml: ModuleType) -> list[Slot]:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        # NVMLError_LibraryNotFound (12) on hosts without the driver, others on broken installs.
        log.debug("NVML unavailable (%s); assuming no GPUs", e)
        return []
    try:
        slots = []
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            slots.append(
                Slot(
                    id=i,
                    type="cuda",
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                )
            )
        return slots
    except nvml.NVMLError as e:
        log.warning("NVML failed while listing GPUs (%s); offering CPU slots instead", e)
        return []
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def detect_slots(cpu_slots: int | None = None, *, nvml: ModuleType | None = None) -> list[Slot]:
    """Return this host's slots: one per GPU, or ``cpu_slots`` CPU slots when there is no GPU.

    ``cpu_slots`` defaults to ``os.cpu_count()`` (at least 1). ``nvml`` replaces the ``pynvml``
    module (for tests); by default it is imported here, and its absence means no GPUs.
    """
    module = nvml if nvml is not None else _import_pynvml()
    gpus = _gpu_slots(module) if module is not None else []
    return gpus or _cpu_slots(cpu_slots)


def gpu_utilization(slot: Slot, *, nvml: ModuleType | None = None) -> dict[str, Any] | None:
    """Return ``{"gpu_percent", "memory_percent", "memory_used", "memory_total"}`` for a cuda slot.

    Returns None for CPU slots and whenever NVML cannot answer; memory figures are bytes.
    """
    if slot.type != "cuda":
        return None
    module = nvml if nvml is not None else _import_pynvml()
    if module is None:
        return None
    try:
        module.nvmlInit()
    except module.NVMLError:
        return None
    try:
        handle = module.nvmlDeviceGetHandleByIndex(slot.id)
        rates = module.nvmlDeviceGetUtilizationRates(handle)
        memory = module.nvmlDeviceGetMemoryInfo(handle)
        return {
            "gpu_percent": int(rates.gpu),
            "memory_percent": int(rates.memory),
            "memory_used": int(memory.used),
            "memory_total": int(memory.total),
        }
    except module.NVMLError as e:
        log.debug("NVML utilization query for GPU %d failed: %s", slot.id, e)
        return None
    finally:
        try:
            module.nvmlShutdown()
        except module.NVMLError:
            pass
