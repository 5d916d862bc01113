"""What a task's container is, from an expanded experiment config (0.38.1's ``environment``,
``bind_mounts`` and ``resources`` keys), for the agents' Docker runtime; and the checks of
those keys that only make sense for containers (capabilities, mount paths, sizes).

A config whose image is the built-in default of its slot type (the config named none, and
neither did the master's ``task_container_defaults``) has no container: its tasks run as
processes, as det-jupyter always ran them. Any other image runs in a container of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from det_agent.wire import BindMount, Container, Device

from ._util import describe, invalid

#: The image a config gets when it names none (0.38.1's defaults): det-jupyter reads it as "no
#: container".
DEFAULT_IMAGES = {
    "cpu": "determinedai/pytorch-ngc-dev:0736b6d",
    "cuda": "determinedai/pytorch-ngc-dev:0736b6d",
    "rocm": "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d",
}

#: Linux capabilities Docker's cap_add / cap_drop take (without the CAP_ prefix), and ALL.
CAPABILITIES = frozenset("""
    ALL AUDIT_CONTROL AUDIT_READ AUDIT_WRITE BLOCK_SUSPEND BPF CHECKPOINT_RESTORE CHOWN
    DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID IPC_LOCK IPC_OWNER KILL LEASE LINUX_IMMUTABLE
    MAC_ADMIN MAC_OVERRIDE MKNOD NET_ADMIN NET_BIND_SERVICE NET_BROADCAST NET_RAW PERFMON SETFCAP
    SETGID SETPCAP SETUID SYSLOG SYS_ADMIN SYS_BOOT SYS_CHROOT SYS_MODULE SYS_NICE SYS_PACCT
    SYS_PTRACE SYS_RAWIO SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG WAKE_ALARM
""".split())
#: /dev/shm of a container whose config and master set no size (0.38.1's
#: task_container_defaults.shm_size_bytes default: data loaders share batches through it).
DEFAULT_SHM_SIZE = 4 << 30
PROPAGATIONS = ("rprivate", "private", "rshared", "shared", "rslave", "slave")
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)[iI]?[bB]?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any, field: str) -> int:
    """Bytes of ``4294967296``, ``"4G"``, ``"512Mi"`` or ``"1.5GB"`` (binary units, as Docker
    reads them)."""
    if isinstance(value, bool):
        raise invalid(field, f"expected a size, got {describe(value)}", 'use bytes or a size like "4G"')
    if isinstance(value, int):
        if value < 0:
            raise invalid(field, "a size must not be negative", 'use bytes or a size like "4G"')
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        raise invalid(field, f"{describe(value)} is not a size", 'use bytes or a size like "4G" or "512M"')
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def check_capabilities(value: Any, field: str) -> None:
    """A list of capability names Docker knows (``SYS_PTRACE`` or ``CAP_SYS_PTRACE``)."""
    if value is None:
        return
    if not isinstance(value, list):
        raise invalid(field, f"expected a list of capability names, got {describe(value)}",
                      "use e.g. `[SYS_PTRACE]`")
    for i, cap in enumerate(value):
        name = cap.upper().removeprefix("CAP_") if isinstance(cap, str) else None
        if name not in CAPABILITIES:
            raise invalid(f"{field}[{i}]", f"unknown capability {describe(cap)}",
                          "use a Linux capability name such as SYS_PTRACE or NET_ADMIN (see capabilities(7))")


def check_container_paths(mounts: list[Any]) -> None:
    """Bind mounts' paths are absolute and their propagation one Docker knows."""
    for i, mount in enumerate(mounts):
        field = f"bind_mounts[{i}]"
        for key in ("host_path", "container_path"):
            if not str(mount[key]).startswith("/"):
                raise invalid(f"{field}.{key}", f"{describe(mount[key])} is not an absolute path",
                              f"give {key} as an absolute path, e.g. /data")
        propagation = mount.get("propagation")
        if propagation is not None and propagation not in PROPAGATIONS:
            raise invalid(f"{field}.propagation", f"unknown propagation {describe(propagation)}",
                          f"use one of {', '.join(PROPAGATIONS)}")


def parse_device(value: Any, field: str) -> Device:
    """A ``resources.devices`` entry: ``{host_path, container_path, mode}`` or the
    ``"/dev/x:/dev/y:rwm"`` string 0.38.1 also takes."""
    if isinstance(value, str):
        parts = value.split(":")
        if not 1 <= len(parts) <= 3 or not all(parts):
            raise invalid(field, f"{describe(value)} is not a device", 'use "/dev/host[:/dev/container[:rwm]]"')
        value = {"host_path": parts[0], "container_path": parts[1] if len(parts) > 1 else parts[0],
                 "mode": parts[2] if len(parts) > 2 else "mrw"}
    if not isinstance(value, dict):
        raise invalid(field, f"expected a device, got {describe(value)}", "use {host_path, container_path, mode}")
    host, inside = value.get("host_path"), value.get("container_path") or value.get("host_path")
    mode = value.get("mode") or "mrw"
    if not (isinstance(host, str) and host.startswith("/") and isinstance(inside, str) and inside.startswith("/")):
        raise invalid(field, "a device needs an absolute host_path (and container_path)",
                      "use e.g. {host_path: /dev/fuse, container_path: /dev/fuse}")
    if not isinstance(mode, str) or not mode or set(mode) - set("rwm"):
        raise invalid(f"{field}.mode", f"{describe(mode)} is not a device mode", "use letters of rwm, e.g. mrw")
    return Device(host, inside, mode)


def _per_slot(value: Any, slot_type: str) -> Any:
    if isinstance(value, dict):
        return value.get(slot_type) if value.get(slot_type) is not None else value.get("gpu")
    return value


def container_for(config: Mapping[str, Any], slot_type: str = "cpu") -> Container | None:
    """The container of a task of the expanded ``config`` on slots of ``slot_type``, or None
    when it names no image of its own (module docstring)."""
    env = config.get("environment") or {}
    image = _per_slot(env.get("image"), slot_type)
    if not isinstance(image, str) or not image or image == DEFAULT_IMAGES.get(slot_type):
        return None
    resources = config.get("resources") or {}
    auth = env.get("registry_auth")
    shm = resources.get("shm_size")
    return Container(
        image=image,
        force_pull=bool(env.get("force_pull_image")),
        registry_auth=None if not isinstance(auth, dict) else
        {str(k): str(v) for k, v in auth.items() if isinstance(v, (str, int)) and not isinstance(v, bool)},
        bind_mounts=tuple(BindMount(m["host_path"], m["container_path"], bool(m.get("read_only")),
                                    m.get("propagation") or "rprivate") for m in config.get("bind_mounts") or ()),
        devices=tuple(parse_device(d, f"resources.devices[{i}]") for i, d in enumerate(resources.get("devices") or ())),
        add_capabilities=tuple(c.upper().removeprefix("CAP_") for c in env.get("add_capabilities") or ()),
        drop_capabilities=tuple(c.upper().removeprefix("CAP_") for c in env.get("drop_capabilities") or ()),
        shm_size=DEFAULT_SHM_SIZE if shm is None else parse_size(shm, "resources.shm_size"),
        pod_spec=dict(env["pod_spec"]) if isinstance(env.get("pod_spec"), dict) else None,
    )
