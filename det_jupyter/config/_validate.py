"""``validate_experiment_config``: the first problem in a config, as an actionable error."""

from __future__ import annotations

from typing import Any

from ._container import check_capabilities, check_container_paths, parse_device, parse_size
from ._hparams import validate_hyperparameters
from ._searcher import check_length, validate_searcher
from ._util import check_int, check_type, describe, invalid, type_name

SLOT_TYPES = ("cpu", "cuda", "rocm")
CHECKPOINT_POLICIES = ("best", "all", "none")
STORAGE_TYPES = ("shared_fs", "directory")
UNSUPPORTED_STORAGE = ("s3", "gcs", "azure", "hdfs")
LOG_ACTIONS = ("exclude_node", "cancel_retries")


def validate_experiment_config(config: dict[str, Any]) -> None:
    """Raise ``InvalidConfig`` naming the first problem found in an experiment config.

    Known keys are type-checked here; unknown keys are ``check_experiment_keys``'s, which
    ``expand_experiment_config`` (the one caller) runs first.
    """
    if not isinstance(config, dict):
        raise invalid("config", f"expected a mapping, got {type_name(config)}",
                      "send the experiment config as a YAML mapping")
    _check_entrypoint(config.get("entrypoint"))
    validate_searcher(config.get("searcher"))
    validate_hyperparameters(config.get("hyperparameters"), config["searcher"].get("name"))
    _check_scalars(config)
    if config.get("resources") is not None:
        _check_resources(config["resources"])
    storage = config.get("checkpoint_storage")
    if storage is not None:
        if isinstance(storage, dict) and storage.get("type") is None:
            # No type: the master's storage with these keys over it (``save_*`` policies, as
            # Determined merges the master's default into the experiment's).
            check_checkpoint_storage({**storage, "type": "directory", "container_path": "/x"},
                                     "checkpoint_storage")
        else:
            check_checkpoint_storage(storage, "checkpoint_storage")
    if config.get("environment") is not None:
        _check_environment(config["environment"])
    if config.get("bind_mounts") is not None:
        _check_bind_mounts(config["bind_mounts"])
    if config.get("log_policies") is not None:
        _check_log_policies(config["log_policies"])


def _check_entrypoint(entrypoint: Any) -> None:
    fix = "set e.g. `entrypoint: python3 train.py` (a string, or a list of argv strings)"
    if entrypoint is None:
        raise invalid("entrypoint", "the experiment config has no entrypoint", fix)
    if isinstance(entrypoint, str):
        if not entrypoint.strip():
            raise invalid("entrypoint", "the entrypoint is empty", fix)
        return
    if not isinstance(entrypoint, list) or not entrypoint or not all(isinstance(a, str) for a in entrypoint):
        raise invalid("entrypoint", f"expected a string or a non-empty list of strings, got {describe(entrypoint)}", fix)


def _check_scalars(config: dict[str, Any]) -> None:
    strings = ("name", "description", "workspace", "project")
    for key in strings:
        if config.get(key) is not None:
            check_type(config[key], key, str, "a string")
    labels = config.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)):
        raise invalid("labels", f"expected a list of strings, got {describe(labels)}", "write e.g. `labels: [baseline]`")
    for key in ("data", "optimizations", "profiling", "reproducibility", "integrations"):
        if config.get(key) is not None:
            check_type(config[key], key, dict, "a mapping")
    for key in ("debug", "perform_initial_validation"):
        if config.get(key) is not None:
            check_type(config[key], key, bool, "true or false")
    for key, minimum in (("max_restarts", 0), ("records_per_epoch", 0), ("scheduling_unit", 1),
                         ("preemption_timeout", 0)):
        if config.get(key) is not None:
            check_int(config[key], key, minimum=minimum)
    policy = config.get("checkpoint_policy")
    if policy is not None and policy not in CHECKPOINT_POLICIES:
        raise invalid("checkpoint_policy", f"unknown checkpoint policy {describe(policy)}",
                      f"use one of {', '.join(CHECKPOINT_POLICIES)}")
    for key in ("min_validation_period", "min_checkpoint_period"):
        if config.get(key) is not None:
            check_length(config[key], key)
    seed = (config.get("reproducibility") or {}).get("experiment_seed")
    if seed is not None:
        check_int(seed, "reproducibility.experiment_seed", minimum=0)


def _check_resources(resources: Any) -> None:
    check_type(resources, "resources", dict, "a mapping")
    if resources.get("slots_per_trial") is not None:
        check_int(resources["slots_per_trial"], "resources.slots_per_trial", minimum=0)
    if resources.get("max_slots") is not None:
        check_int(resources["max_slots"], "resources.max_slots", minimum=0)
    if resources.get("priority") is not None:
        check_int(resources["priority"], "resources.priority", minimum=1, maximum=99)
    if resources.get("weight") is not None:
        check_type(resources["weight"], "resources.weight", (int, float), "a number")
        if resources["weight"] < 0:
            raise invalid("resources.weight", "weight must not be negative", "use e.g. `weight: 1`")
    if resources.get("resource_pool") is not None:
        check_type(resources["resource_pool"], "resources.resource_pool", str, "a string")
    if resources.get("is_single_node") is not None:
        check_type(resources["is_single_node"], "resources.is_single_node", bool, "true or false")
    _check_container_resources(resources)


def _check_container_resources(resources: dict[str, Any]) -> None:
    if resources.get("shm_size") is not None:
        check_type(resources["shm_size"], "resources.shm_size", (int, str), "bytes or a size like \"4G\"")
        parse_size(resources["shm_size"], "resources.shm_size")
    if resources.get("devices") is not None:
        check_type(resources["devices"], "resources.devices", list, "a list")
        for i, device in enumerate(resources["devices"]):
            parse_device(device, f"resources.devices[{i}]")


def validate_container_keys(config: dict[str, Any]) -> None:
    """Raise ``InvalidConfig`` naming the first problem in the keys a task's container is made
    of (``environment``, ``bind_mounts``, ``resources.shm_size`` and ``devices``): for task
    configs (commands, notebooks, shells, TensorBoards) and the master's
    ``task_container_defaults``, whose other keys are checked elsewhere."""
    if config.get("environment") is not None:
        _check_environment(config["environment"])
    if config.get("bind_mounts") is not None:
        _check_bind_mounts(config["bind_mounts"])
    resources = config.get("resources")
    if resources is not None:
        check_type(resources, "resources", dict, "a mapping")
        _check_container_resources(resources)


def check_checkpoint_storage(storage: Any, field: str) -> None:
    """Validate a ``checkpoint_storage`` mapping (also used for the master's default)."""
    check_type(storage, field, dict, "a mapping")
    kind = storage.get("type")
    if kind in UNSUPPORTED_STORAGE:
        raise invalid(f"{field}.type", f"checkpoint storage type {kind!r} is not supported yet "
                                       "(s3, gcs and azure are not supported yet; only shared_fs "
                                       "and directory are)",
                      "use `type: shared_fs` with a host_path, or `type: directory`")
    if kind not in STORAGE_TYPES:
        raise invalid(f"{field}.type", f"unknown checkpoint storage type {describe(kind)}",
                      f"use one of {', '.join(STORAGE_TYPES)}")
    required = "host_path" if kind == "shared_fs" else "container_path"
    if not isinstance(storage.get(required), str) or not storage[required]:
        raise invalid(f"{field}.{required}", f"{kind} checkpoint storage needs {required}",
                      f"add `{required}: /path/to/checkpoints`")
    for key in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
        if storage.get(key) is not None:
            check_int(storage[key], f"{field}.{key}", minimum=0)
    for key in ("storage_path", "container_path", "checkpoint_path", "tensorboard_path"):
        if storage.get(key) is not None:
            check_type(storage[key], f"{field}.{key}", str, "a string")


def check_env_var_list(value: Any, field: str) -> None:
    """A list of ``KEY=VALUE`` strings."""
    fix = 'write e.g. `environment_variables: ["NCCL_DEBUG=INFO"]`'
    if not isinstance(value, list):
        raise invalid(field, f"expected a list of \"KEY=VALUE\" strings, got {type_name(value)}", fix)
    for i, item in enumerate(value):
        if not isinstance(item, str) or "=" not in item or item.startswith("="):
            raise invalid(f"{field}[{i}]", f"expected a \"KEY=VALUE\" string, got {describe(item)}", fix)


def _check_environment(env: Any) -> None:
    check_type(env, "environment", dict, "a mapping")
    variables = env.get("environment_variables")
    if isinstance(variables, dict):
        for key, value in variables.items():
            if key not in (*SLOT_TYPES, "gpu"):
                raise invalid(f"environment.environment_variables.{key}", f"unknown slot type {key!r}",
                              f"use keys {', '.join(SLOT_TYPES)} (or a plain list for all of them)")
            if value is not None:
                check_env_var_list(value, f"environment.environment_variables.{key}")
    elif variables is not None:
        check_env_var_list(variables, "environment.environment_variables")
    image = env.get("image")
    if isinstance(image, dict):
        for key, value in image.items():
            if key not in (*SLOT_TYPES, "gpu"):
                raise invalid(f"environment.image.{key}", f"unknown slot type {key!r}",
                              f"use keys {', '.join(SLOT_TYPES)} (or one string for all of them)")
            if value is not None:
                check_type(value, f"environment.image.{key}", str, "an image name")
    elif image is not None:
        check_type(image, "environment.image", str, "an image name or a {cpu, cuda, rocm} mapping")
    if env.get("ports") is not None:
        check_type(env["ports"], "environment.ports", dict, "a mapping of name to port")
        for name, port in env["ports"].items():
            check_int(port, f"environment.ports.{name}", minimum=1, maximum=65535)
    if env.get("proxy_ports") is not None:
        check_type(env["proxy_ports"], "environment.proxy_ports", list, "a list")
        for i, item in enumerate(env["proxy_ports"]):
            check_type(item, f"environment.proxy_ports[{i}]", dict, "a mapping")
            check_int(item.get("proxy_port"), f"environment.proxy_ports[{i}].proxy_port", minimum=1, maximum=65535)
    if env.get("force_pull_image") is not None:
        check_type(env["force_pull_image"], "environment.force_pull_image", bool, "true or false")
    for key in ("add_capabilities", "drop_capabilities"):
        check_capabilities(env.get(key), f"environment.{key}")
    if env.get("registry_auth") is not None:
        check_type(env["registry_auth"], "environment.registry_auth", dict,
                   "a mapping with username, password and serveraddress")


def _check_bind_mounts(mounts: Any) -> None:
    check_type(mounts, "bind_mounts", list, "a list")
    for i, mount in enumerate(mounts):
        field = f"bind_mounts[{i}]"
        check_type(mount, field, dict, "a mapping with host_path and container_path")
        for key in ("host_path", "container_path"):
            if not isinstance(mount.get(key), str) or not mount[key]:
                raise invalid(f"{field}.{key}", f"a bind mount needs {key}", f"add `{key}: /some/path`")
        if mount.get("read_only") is not None:
            check_type(mount["read_only"], f"{field}.read_only", bool, "true or false")
    check_container_paths(mounts)


def _check_log_policies(policies: Any) -> None:
    check_type(policies, "log_policies", list, "a list")
    for i, policy in enumerate(policies):
        field = f"log_policies[{i}]"
        check_type(policy, field, dict, "a mapping with name, pattern and action")
        legacy = policy.get("name") is None and policy.get("pattern") is not None \
            and policy.get("action") is not None  # 0.38.1 still takes the unnamed pre-0.38 form
        if not legacy and (not isinstance(policy.get("name"), str) or not policy["name"]):
            raise invalid(f"{field}.name", "a log policy needs a name (or, in the legacy form, "
                          "a pattern and an action)", "add e.g. `name: CUDA OOM`")
        if policy.get("pattern") is not None:
            check_type(policy["pattern"], f"{field}.pattern", str, "a regular expression")
        action = policy.get("action")
        if isinstance(action, dict):  # the pre-0.38 format `action: {type: ...}`
            action = action.get("type")
        if action is not None and action not in LOG_ACTIONS:
            raise invalid(f"{field}.action", f"unknown log policy action {describe(action)}",
                          f"use one of {', '.join(LOG_ACTIONS)}")
