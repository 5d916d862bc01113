"""The master's ``task_container_defaults`` (0.38.1's key, in master.yaml and in each resource
pool): what a task's container gets when its config does not say, merged as 0.38.1's
``MergeIntoExpConfig`` merges it (the config wins; lists are joined).

``container_defaults`` reads the master's mapping into a fragment shaped like a task config
(``environment``, ``bind_mounts``, ``resources``); ``apply_container_defaults`` merges such a
fragment under a config. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from det_jupyter.errors import InvalidConfig

from ._validate import validate_container_keys

#: 0.38.1 keys merged into a task's config: theirs -> (section, key) of the task config.
MERGED = {
    "image": ("environment", "image"),
    "environment_variables": ("environment", "environment_variables"),
    "force_pull_image": ("environment", "force_pull_image"),
    "registry_auth": ("environment", "registry_auth"),
    "add_capabilities": ("environment", "add_capabilities"),
    "drop_capabilities": ("environment", "drop_capabilities"),
    "bind_mounts": ("", "bind_mounts"),
    "devices": ("resources", "devices"),
    "shm_size_bytes": ("resources", "shm_size"),
}
#: 0.38.1 keys taken and not used here: containers use the host's network, pod specs are for
#: Kubernetes, Slurm and PBS are not supported, the rest have settings of their own.
IGNORED = frozenset({
    "dtrain_network_interface", "nccl_port_range", "gloo_port_range", "network_mode",
    "cpu_pod_spec", "gpu_pod_spec", "checkpoint_gc_pod_spec", "work_dir", "slurm", "pbs",
    "startup_hook", "log_policies", "preemption_timeout", "kubernetes",
})


def container_defaults(raw: Any, where: str = "task_container_defaults") -> dict[str, Any]:
    """The fragment of a ``task_container_defaults`` mapping; raises ValueError naming the
    first bad key (the master refuses to start with it)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping (image, environment_variables, bind_mounts, ...)")
    unknown = sorted(set(raw) - set(MERGED) - IGNORED)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                         f"{', '.join(sorted({*MERGED, *IGNORED}))}")
    fragment: dict[str, Any] = {}
    for key, (section, name) in MERGED.items():
        if raw.get(key) is None:
            continue
        value = copy.deepcopy(raw[key])
        if section:
            fragment.setdefault(section, {})[name] = value
        else:
            fragment[name] = value
    try:
        validate_container_keys(fragment)
    except InvalidConfig as exc:
        raise ValueError(f"{where}: {exc.message}") from None
    return fragment


def apply_container_defaults(config: Mapping[str, Any], fragment: Mapping[str, Any] | None) -> dict[str, Any]:
    """A new config: ``config`` with what it leaves unset taken from ``fragment``. Scalars and
    the image: the config's when set. Environment variables: the defaults', then the
    config's (a later one wins). Bind mounts and devices: the defaults' whose container path
    the config does not use, then the config's."""
    out = copy.deepcopy(dict(config))
    if not fragment:
        return out
    env_d = fragment.get("environment") or {}
    if env_d:
        env = dict(out["environment"]) if isinstance(out.get("environment"), dict) else {}
        for key, value in env_d.items():
            if key == "environment_variables":
                env[key] = _join_variables(value, env.get(key))
            elif env.get(key) is None:
                env[key] = copy.deepcopy(value)
        out["environment"] = env
    if fragment.get("bind_mounts"):
        mounts = out.get("bind_mounts")
        out["bind_mounts"] = _join_by_path(fragment["bind_mounts"], mounts if isinstance(mounts, list) else [])
    res_d = fragment.get("resources") or {}
    if res_d:
        res = dict(out["resources"]) if isinstance(out.get("resources"), dict) else {}
        if res_d.get("devices"):
            devices = res.get("devices")
            res["devices"] = _join_by_path(res_d["devices"], devices if isinstance(devices, list) else [])
        if res.get("shm_size") is None and res_d.get("shm_size") is not None:
            res["shm_size"] = res_d["shm_size"]
        out["resources"] = res
    return out


def _per_device(value: Any) -> dict[str, list[str]]:
    if isinstance(value, dict):
        gpu = value.get("gpu") or []
        return {k: list(value.get(k) or (gpu if k == "cuda" else [])) for k in ("cpu", "cuda", "rocm")}
    return {k: list(value or []) for k in ("cpu", "cuda", "rocm")}


def _join_variables(defaults: Any, mine: Any) -> Any:
    if not isinstance(defaults, dict) and not isinstance(mine, dict):
        return [*(defaults or []), *(mine or [])]
    d, m = _per_device(defaults), _per_device(mine)
    return {k: [*d[k], *m[k]] for k in d}


def _join_by_path(defaults: list[Any], mine: list[Any]) -> list[Any]:
    def path(item: Any) -> Any:
        if isinstance(item, dict):
            return item.get("container_path") or item.get("host_path")
        if isinstance(item, str):  # a device as "/dev/x:/dev/y:rwm"
            parts = item.split(":")
            return parts[1] if len(parts) > 1 else parts[0]
        return None

    taken = {path(m) for m in mine}
    return [copy.deepcopy(d) for d in defaults if path(d) not in taken] + list(mine)
