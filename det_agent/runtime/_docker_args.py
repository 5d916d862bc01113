"""What the Docker runtime asks the engine for, built without talking to it: the container's
create arguments from a task spec, its environment's differences from a process's, image
references and start errors (``_docker`` uses these; tests check them as plain data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._isolation import RUN_MOUNT, WORKDIR_MOUNT, Identity
from ._launch import entrypoint_argv
from ._taskdir import TaskDir

#: Where the harness package appears inside a container (first on PYTHONPATH).
HARNESS_MOUNT = RUN_MOUNT + "/harness"
LABEL_ALLOCATION = "ai.det-jupyter.allocation"
LABEL_AGENT = "ai.det-jupyter.agent"
#: The seq of the container's first log line (lines of the pull came before it).
LABEL_SEQ = "ai.det-jupyter.log-seq"


def container_env(env: dict[str, str], spec: Mapping[str, Any]) -> None:
    """What of a process's environment differs in a container, in place: PATH is the image's
    (unless the task's config sets one), and the shared checkpoint storage is where its mount
    puts it (``DET_SHARED_FS_HOST_PATH`` names the host's directory, which a container does not
    see at that path)."""
    if "PATH" not in (spec.get("env") or {}):
        env.pop("PATH", None)
    shared = env.get("DET_SHARED_FS_HOST_PATH")
    for m in spec.get("mounts") or ():
        if shared and m.get("host_path") == shared:
            env["DET_SHARED_FS_HOST_PATH"] = m["container_path"]


def image_ref(image: str) -> tuple[str, str]:
    """``(repository, tag)`` of an image reference; the tag is ``latest`` when none is given
    and the digest when one is (``repo@sha256:...``)."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1:]
    return image, "latest"


def container_args(
    spec: Mapping[str, Any],
    *,
    taskdir: TaskDir,
    env: Mapping[str, str],
    identity: Identity,
    agent_id: str,
    harness_package: str | None,
    gpu_ids: Sequence[str] = (),
    mem_limit: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(create_container kwargs, create_host_config kwargs)`` for the task of ``spec``
    (``spec["container"]`` given). ``harness_package``: the host's ``det_harness`` directory,
    bound read-only at ``HARNESS_MOUNT/det_harness``. ``gpu_ids``: host GPU indices/uuids
    handed over through the NVIDIA runtime. ``mem_limit``: bytes (an agent setting, not the
    spec's). Raises ValueError naming a bad field."""
    container = spec["container"]
    mounts: list[dict[str, Any]] = [
        _bind(taskdir.run, RUN_MOUNT),
        _bind(taskdir.work, WORKDIR_MOUNT),
    ]
    if harness_package:
        mounts.append(_bind(harness_package, f"{HARNESS_MOUNT}/det_harness", read_only=True))
    for m in spec.get("mounts") or []:
        mounts.append(_bind(m["host_path"], m["container_path"]))
    for b in container.get("bind_mounts") or []:
        mounts.append(_bind(b["host_path"], b["container_path"], read_only=bool(b.get("read_only")),
                            propagation=b.get("propagation") or "rprivate"))
    host: dict[str, Any] = {
        # The engine's init (tini) is pid 1: it passes a kill's SIGTERM on to the entrypoint
        # (a pid 1 without handlers would ignore it) and reaps orphaned children.
        "init": True,
        "network_mode": "host",
        "mounts": mounts,
        "cap_drop": sorted({"ALL", *container.get("drop_capabilities", ())}),
        "security_opt": ["no-new-privileges"],
    }
    if container.get("add_capabilities"):
        host["cap_add"] = list(container["add_capabilities"])
    devices = [f"{d['host_path']}:{d['container_path']}:{d.get('mode') or 'mrw'}"
               for d in container.get("devices") or []]
    if devices:
        host["devices"] = devices
    if container.get("shm_size") is not None:
        host["shm_size"] = int(container["shm_size"])
    if mem_limit is not None:
        host["mem_limit"] = host["memswap_limit"] = mem_limit  # no swap beyond it either
    if gpu_ids:
        host["device_requests"] = [{"driver": "nvidia", "device_ids": list(gpu_ids),
                                    "capabilities": [["gpu"]]}]
    allocation_id = str(spec["allocation_id"])
    create = {
        "image": container["image"],
        "entrypoint": entrypoint_argv(spec["entrypoint"]),
        "command": [],
        "user": f"{identity.uid}:{identity.gid}",
        "working_dir": WORKDIR_MOUNT,
        "environment": dict(env),
        "labels": {LABEL_ALLOCATION: allocation_id, LABEL_AGENT: agent_id},
        "detach": True,
    }
    return create, host


def start_error_code(message: str) -> int:
    """The exit code of a container the engine could not start, as a shell would say it: 127
    when the entrypoint is not found, 126 when it cannot be executed, else 1."""
    text = message.lower()
    if 'exec: "' not in text:  # a mount or cgroup error, not the entrypoint's
        return 1
    if "executable file not found" in text or "no such file or directory" in text:
        return 127
    if "permission denied" in text:
        return 126
    return 1


def _bind(source: str, target: str, *, read_only: bool = False,
          propagation: str = "rprivate") -> dict[str, Any]:
    return {"Type": "bind", "Source": source, "Target": target, "ReadOnly": read_only,
            "BindOptions": {"Propagation": propagation}}
