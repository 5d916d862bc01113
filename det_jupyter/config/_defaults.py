"""``expand_experiment_config``: fill Determined 0.38's schema defaults into a new dict."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._container import DEFAULT_IMAGES
from ._container_defaults import apply_container_defaults
from ._hparams import normalize_hyperparameters
from ._keys import check_experiment_keys
from ._validate import SLOT_TYPES, check_checkpoint_storage, validate_experiment_config

# Determined 0.38.1 master/pkg/schemas/expconf/const.go
DEFAULT_LOG_POLICIES = (
    {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*"},
    {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*"},
)

_SEARCHER_DEFAULTS: dict[str, Any] = {
    "smaller_is_better": True,
    "max_concurrent_trials": 16,
    "source_trial_id": None,
    "source_checkpoint_uuid": None,
}
_ASHA_DEFAULTS: dict[str, Any] = {"mode": "standard", "divisor": 4, "max_rungs": 5, "bracket_rungs": []}
_RESOURCES_DEFAULTS: dict[str, Any] = {
    "slots_per_trial": 1, "resource_pool": "", "weight": 1, "priority": None, "max_slots": None,
    "shm_size": None, "is_single_node": False, "devices": [], "native_parallel": False,
    "agent_label": None,
}
_STORAGE_DEFAULTS: dict[str, Any] = {
    "save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1,
}
_SHARED_FS_DEFAULTS: dict[str, Any] = {
    "storage_path": None, "container_path": None, "checkpoint_path": None,
    "tensorboard_path": None, "propagation": "rprivate",
}
_OPTIMIZATIONS_DEFAULTS: dict[str, Any] = {
    "aggregation_frequency": 1, "average_aggregated_gradients": True,
    "average_training_metrics": True, "gradient_compression": False,
    "grad_updates_size_file": None, "mixed_precision": "O0", "tensor_fusion_threshold": 64,
    "tensor_fusion_cycle_time": 1, "auto_tune_tensor_fusion": False,
}
_TOP_DEFAULTS: dict[str, Any] = {
    "description": "", "labels": [], "data": {}, "bind_mounts": [], "checkpoint_policy": "best",
    "max_restarts": 5, "min_validation_period": {"batches": 0}, "min_checkpoint_period": {"batches": 0},
    "records_per_epoch": 0, "scheduling_unit": 100, "perform_initial_validation": False,
    "optimizations": {}, "debug": False, "preemption_timeout": None, "workspace": None,
    "project": None, "retention_policy": None, "integrations": None, "tensorboard_storage": None,
}

_ADJECTIVES = ("amber", "brisk", "calm", "daring", "eager", "fuzzy", "gentle", "hidden", "icy",
               "jolly", "keen", "lucky", "mellow", "noble", "olive", "proud", "quiet", "rapid",
               "silent", "tidy", "upbeat", "vivid", "witty", "young", "zesty")
_NOUNS = ("otter", "falcon", "maple", "comet", "badger", "harbor", "meadow", "lynx", "pebble",
          "raven", "cedar", "delta", "ember", "fjord", "glacier", "heron", "island", "juniper",
          "kestrel", "lagoon", "mesa", "nebula", "orchid", "prairie", "quartz")


@dataclass(frozen=True)
class MasterDefaults:
    """Master-level defaults that expansion needs.

    ``checkpoint_storage`` is used when a config has none (and fills keys a config of the same
    type leaves out); ``images`` overrides the default task image per slot type;
    ``default_priority`` is the priority scheduler's default (left for the scheduler: the
    expanded config keeps ``resources.priority: null`` as Determined does).
    ``container_defaults(pool, slots)``: the ``task_container_defaults`` fragment of the pool
    a config names (``""``: the default pool for ``slots``), merged under the config.
    """

    checkpoint_storage: dict[str, Any]
    default_priority: int = 42
    images: dict[str, str] = field(default_factory=dict)
    environment_variables: tuple[str, ...] = ()
    container_defaults: Callable[[str, int], Mapping[str, Any] | None] | None = None


def default_name(seed: int) -> str:
    """A readable, deterministic experiment name such as ``Experiment calm-otter``."""
    rng = random.Random(seed)
    return f"Experiment {rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}"


def _fill(target: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    for key, value in defaults.items():
        if target.get(key) is None:
            target[key] = copy.deepcopy(value)
    return target


def _per_slot(value: Any, default: dict[str, Any]) -> dict[str, Any]:
    """Normalise a plain value or a {cpu, cuda/gpu, rocm} mapping to all three slot types."""
    if isinstance(value, dict):
        out = {slot: value.get(slot) for slot in SLOT_TYPES}
        if out["cuda"] is None and value.get("gpu") is not None:
            out["cuda"] = value["gpu"]  # "gpu" is the pre-rocm spelling of "cuda"
        return {slot: out[slot] if out[slot] is not None else copy.deepcopy(default[slot])
                for slot in SLOT_TYPES}
    if value is None:
        return copy.deepcopy(default)
    return {slot: copy.deepcopy(value) for slot in SLOT_TYPES}


def _expand_environment(env: dict[str, Any] | None, defaults: MasterDefaults) -> dict[str, Any]:
    env = env or {}
    images = {**DEFAULT_IMAGES, **defaults.images}
    master_vars = list(defaults.environment_variables)
    variables = _per_slot(env.get("environment_variables"), {s: [] for s in SLOT_TYPES})
    env["environment_variables"] = {s: master_vars + variables[s] for s in SLOT_TYPES}
    env["image"] = _per_slot(env.get("image"), images)
    _fill(env, {"ports": {}, "proxy_ports": [], "force_pull_image": False, "registry_auth": None,
                "pod_spec": None, "add_capabilities": [], "drop_capabilities": []})
    for port in env["proxy_ports"]:
        _fill(port, {"proxy_tcp": False, "unauthenticated": False, "default_service_id": False})
    return env


def _expand_checkpoint_storage(storage: dict[str, Any] | None, defaults: MasterDefaults) -> dict[str, Any]:
    master = copy.deepcopy(defaults.checkpoint_storage)
    if storage is None:
        storage = master
    elif storage.get("type") in (None, master.get("type")):
        storage = {**master, **{k: v for k, v in storage.items() if v is not None}}
    _fill(storage, _STORAGE_DEFAULTS)
    if storage["type"] == "shared_fs":
        _fill(storage, _SHARED_FS_DEFAULTS)
    return storage


def expand_experiment_config(config: dict[str, Any], defaults: MasterDefaults, *, seed: int) -> dict[str, Any]:
    """Validate ``config`` and return a NEW dict with every Determined default filled in.

    ``seed`` makes the generated name and the default ``reproducibility.experiment_seed``
    deterministic. The input is never mutated. Unknown keys are refused first (a misspelt
    key would otherwise be filled with its default, and the typo would run silently).
    """
    check_experiment_keys(config)
    validate_experiment_config(config)
    check_checkpoint_storage(defaults.checkpoint_storage, "master.checkpoint_storage")
    out = copy.deepcopy(config)
    if defaults.container_defaults is not None:  # the master's task_container_defaults
        res = out.get("resources") or {}
        pool = res.get("resource_pool") if isinstance(res.get("resource_pool"), str) else ""
        slots = res.get("slots_per_trial", 1)
        out = apply_container_defaults(out, defaults.container_defaults(pool or "", slots if isinstance(slots, int) else 1))
    if not out.get("name"):
        out["name"] = default_name(seed)
    _fill(out, _TOP_DEFAULTS)
    if out.get("log_policies") is None:
        out["log_policies"] = [dict(p) for p in DEFAULT_LOG_POLICIES]
    out["hyperparameters"] = normalize_hyperparameters(out.get("hyperparameters"))

    searcher = _fill(out["searcher"], _SEARCHER_DEFAULTS)
    if searcher["name"] == "adaptive_asha":
        _fill(searcher, _ASHA_DEFAULTS)
    elif searcher["name"] == "async_halving":
        _fill(searcher, {"divisor": _ASHA_DEFAULTS["divisor"]})
    _fill(searcher, {"max_length": None, "max_time": None, "time_metric": None})

    out["resources"] = _fill(out.get("resources") or {}, _RESOURCES_DEFAULTS)
    out["checkpoint_storage"] = _expand_checkpoint_storage(out.get("checkpoint_storage"), defaults)
    out["reproducibility"] = _fill(out.get("reproducibility") or {}, {"experiment_seed": seed})
    out["environment"] = _expand_environment(out.get("environment"), defaults)
    for mount in out["bind_mounts"]:
        _fill(mount, {"read_only": False, "propagation": "rprivate"})
    # Deprecated in 0.38 but still read by the stock Trial runner (determined.exec.harness).
    out["optimizations"] = _fill(out.get("optimizations") or {}, _OPTIMIZATIONS_DEFAULTS)
    out["profiling"] = _fill(out.get("profiling") or {},
                             {"enabled": False, "begin_on_batch": 0, "end_after_batch": None, "sync_timings": True})
    return out


def environment_variables(config: dict[str, Any], slot_type: str) -> dict[str, str]:
    """The ``KEY=VALUE`` variables of an expanded config for ``slot_type`` ("cpu"/"cuda"/"rocm")."""
    variables = ((config.get("environment") or {}).get("environment_variables")) or {}
    if isinstance(variables, list):
        items = variables
    else:
        items = variables.get(slot_type) or []
    out: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = value  # later entries win, as with a shell's repeated assignments
    return out


def searcher_max_length(config: dict[str, Any]) -> int | None:
    """The Core API searcher operation length: ``max_length`` (int or {unit: N}), else ``max_time``."""
    searcher = config.get("searcher") or {}
    length = searcher.get("max_length")
    if isinstance(length, dict) and length:
        return int(next(iter(length.values())))
    if isinstance(length, int) and not isinstance(length, bool):
        return length
    max_time = searcher.get("max_time")
    if isinstance(max_time, int) and not isinstance(max_time, bool):
        return max_time
    return None
