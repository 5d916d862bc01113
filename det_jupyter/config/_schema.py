"""Which keys a config may hold, level by level: Determined 0.38.1's closed schemas as data.

The experiment tables follow ``schemas/expconf/v0/*.json`` (every object there with
``additionalProperties: false``); the task tables follow the Go struct ``model.CommandConfig``,
which the master decodes with ``DisallowUnknownFields`` (so its plain structs are closed, while
the types with their own ``UnmarshalJSON`` — bind mounts, devices, image, environment variables
— take any keys). Only keys are described here; types and values are ``_validate``'s.

A node is one of:

- ``FREE`` (None): anything goes (``data``, ``pod_spec``, a hyperparameter's ``val``);
- ``Closed``: a mapping whose keys are fixed, each key's value described by its own node;
- ``Union``: a ``Closed`` chosen by a discriminator key (``searcher.name``,
  ``checkpoint_storage.type``), with the keys of every member when it names none or an unknown one;
- ``Each``: a list whose mapping items are described by one node;
- ``Values``: a mapping with free keys whose values are described by one node;
- ``HPARAM``: one hyperparameter (a ``type``-d spec, a group of them, or a plain value).

A node only describes mappings (and lists): a value of another type passes here and is left to
the type checks, which name the expected type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

FREE = None


@dataclass(frozen=True)
class Closed:
    """A mapping with fixed keys. ``what`` names it in messages ("a length");
    ``hints`` map a known wrong key to the right one where spelling alone cannot tell
    (``slots`` → ``slots_per_trial``); ``whole`` reports a bad key on the mapping itself
    (a length is one value: ``{batches: N}``, not a mapping of settings)."""

    fields: Mapping[str, Node]
    what: str = ""
    hints: Mapping[str, str] = field(default_factory=dict)
    whole: bool = False


@dataclass(frozen=True)
class Union:
    """One ``Closed`` per value of ``key``; ``fallback`` (every member's keys) when the mapping
    names no member. ``label`` names a member in messages: ``label.format(value)``.
    ``tolerated`` keys pass in every member (see ``SEARCHER``)."""

    key: str
    members: Mapping[str, Closed]
    fallback: Closed
    label: str
    current: tuple[str, ...] = ()  # the members to name when pointing at others
    tolerated: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Each:
    item: Node


@dataclass(frozen=True)
class Values:
    value: Node


class _Hparam:
    """Marker node: a hyperparameter, checked by ``_keys`` (it recurses through groups)."""


HPARAM = _Hparam()

Node: TypeAlias = "Closed | Union | Each | Values | _Hparam | None"


def closed(*names: str, what: str = "", hints: Mapping[str, str] | None = None, whole: bool = False,
           **nodes: Node) -> Closed:
    """A ``Closed`` whose ``names`` are free and whose ``nodes`` are described further."""
    return Closed({**dict.fromkeys(names), **nodes}, what, dict(hints or {}), whole)


def _union_of(members: Mapping[str, Closed], **extra: Node) -> Closed:
    fields: dict[str, Node] = {}
    for member in members.values():
        fields.update(member.fields)
    return Closed({**fields, **extra})


# -- small closed objects ---------------------------------------------------------------------

LENGTH = closed("batches", "records", "epochs", what="a length", whole=True)
BIND_MOUNT = closed("host_path", "container_path", "read_only", "propagation", what="a bind mount")
DEVICE = closed("host_path", "container_path", "mode", what="a device")
PROXY_PORT = closed("proxy_port", "proxy_tcp", "unauthenticated", "default_service_id", what="a proxy port")
REGISTRY_AUTH = closed("username", "password", "auth", "email", "serveraddress", "identitytoken",
                       "registrytoken")
PER_SLOT = closed("cpu", "cuda", "rocm", "gpu")  # image / environment_variables as a mapping
PBS = closed("slots_per_node", "pbsbatch_args")
SLURM = closed("slots_per_node", "gpu_type", "sbatch_args")

# -- searcher ---------------------------------------------------------------------------------

_COMMON = {"name": FREE, "metric": FREE, "smaller_is_better": FREE, "source_trial_id": FREE,
           "source_checkpoint_uuid": FREE, "max_length": LENGTH}
_SEARCHERS = {
    "single": Closed(_COMMON),
    "random": Closed({**_COMMON, "max_trials": FREE, "max_concurrent_trials": FREE}),
    "grid": Closed({**_COMMON, "max_concurrent_trials": FREE}),
    "adaptive_asha": Closed({**_COMMON, **dict.fromkeys((
        "bracket_rungs", "max_trials", "time_metric", "max_time", "mode", "divisor", "max_rungs",
        "max_concurrent_trials", "stop_once"))}),
    "async_halving": Closed({**_COMMON, **dict.fromkeys((
        "num_rungs", "max_trials", "divisor", "max_concurrent_trials", "stop_once", "time_metric",
        "max_time"))}),
    # End-of-life searchers the schema still lists (refused later, by name, with a way out).
    "adaptive": Closed({**_COMMON, "budget": LENGTH, **dict.fromkeys((
        "bracket_rungs", "mode", "divisor", "max_rungs", "train_stragglers"))}),
    "adaptive_simple": Closed({**_COMMON, **dict.fromkeys(("max_trials", "mode", "divisor", "max_rungs"))}),
    "sync_halving": Closed({**_COMMON, "budget": LENGTH, **dict.fromkeys((
        "num_rungs", "divisor", "train_stragglers"))}),
}
_ANY_SEARCHER = _union_of(_SEARCHERS, unit=FREE)  # searcher.json's own (closed) key list
_SEARCHERS["custom"] = _ANY_SEARCHER  # its member schema is open; searcher.json still closes it
SEARCHER = Union(
    "name", _SEARCHERS, _ANY_SEARCHER, "the {} searcher",
    current=("single", "random", "grid", "adaptive_asha", "async_halving"),
    # Beyond 0.38.1: every searcher here reads max_time (with its time_metric) as the trial
    # length when there is no max_length (``searcher_max_length``), and the expanded configs
    # this master stores give every searcher max_concurrent_trials: a stored config read back
    # and submitted again (`det e config ID > c.yaml`) must pass.
    tolerated=frozenset({"max_concurrent_trials", "max_time", "time_metric"}),
)

# -- storage ----------------------------------------------------------------------------------

_SAVE = ("save_experiment_best", "save_trial_best", "save_trial_latest")
_STORAGES = {
    "shared_fs": closed("type", "host_path", "storage_path", "propagation", "container_path",
                        "checkpoint_path", "tensorboard_path", *_SAVE),
    "directory": closed("type", "container_path", *_SAVE),
    "s3": closed("type", "access_key", "bucket", "secret_key", "endpoint_url", "prefix", *_SAVE),
    "gcs": closed("type", "bucket", "prefix", *_SAVE),
    "azure": closed("type", "container", "connection_string", "account_url", "credential", *_SAVE),
}
CHECKPOINT_STORAGE = Union(
    "type", _STORAGES, _union_of(_STORAGES, user=FREE), "{} checkpoint storage",
    current=tuple(_STORAGES))
_TB_STORAGES = {k: _STORAGES[k] for k in ("shared_fs", "s3", "gcs")}
TENSORBOARD_STORAGE = Union("type", _TB_STORAGES, _union_of(_TB_STORAGES), "{} tensorboard storage",
                            current=tuple(_TB_STORAGES))

# -- hyperparameters --------------------------------------------------------------------------

HPARAM_KINDS: dict[str, Closed] = {
    "const": closed("type", "val", what="a const hyperparameter"),
    "categorical": closed("type", "vals", what="a categorical hyperparameter"),
    "int": closed("type", "minval", "maxval", "count", what="an int hyperparameter"),
    "double": closed("type", "minval", "maxval", "count", what="a double hyperparameter"),
    "log": closed("type", "minval", "maxval", "base", "count", what="a log hyperparameter"),
}

# -- the experiment config --------------------------------------------------------------------

_LOG_ACTION = Union("type", {k: closed("type") for k in ("cancel_retries", "exclude_node")},
                    closed("type"), "log policy action {}", current=("cancel_retries", "exclude_node"))
ENVIRONMENT = closed(
    "ports", "force_pull_image", "add_capabilities", "drop_capabilities",
    pod_spec=FREE, image=PER_SLOT, environment_variables=PER_SLOT, proxy_ports=Each(PROXY_PORT),
    registry_auth=REGISTRY_AUTH)
_RESOURCE_KEYS = ("agent_label", "is_single_node", "max_slots", "native_parallel", "priority",
                  "resource_pool", "shm_size", "slots_per_trial", "weight")
EXPERIMENT_RESOURCES = closed(
    *_RESOURCE_KEYS, devices=Each(DEVICE),
    # resources.json lists `slots` (the commands' key), but the master refuses it in experiments.
    hints={"slots": "slots_per_trial"})
EXPERIMENT = closed(
    "checkpoint_policy", "data", "data_layer", "debug", "description", "entrypoint", "internal",
    "labels", "max_restarts", "name", "perform_initial_validation", "preemption_timeout",
    "project", "records_per_epoch", "scheduling_unit", "workspace",
    what="the experiment config",
    bind_mounts=Each(BIND_MOUNT),
    checkpoint_storage=CHECKPOINT_STORAGE,
    environment=ENVIRONMENT,
    hyperparameters=Values(HPARAM),
    integrations=closed(
        pachyderm=closed(
            pachd=closed("host", "port"), proxy=closed("scheme", "host", "port"),
            dataset=closed("project", "repo", "commit", "branch", "token")),
        webhooks=closed("webhook_id", "webhook_name", "exclude")),
    log_policies=Each(closed("name", "pattern", what="a log policy", action=_LOG_ACTION)),
    min_checkpoint_period=LENGTH,
    min_validation_period=LENGTH,
    optimizations=closed(
        "aggregation_frequency", "auto_tune_tensor_fusion", "average_aggregated_gradients",
        "average_training_metrics", "gradient_compression", "grad_updates_size_file",
        "mixed_precision", "tensor_fusion_cycle_time", "tensor_fusion_threshold"),
    pbs=PBS,
    profiling=closed("enabled", "begin_on_batch", "end_after_batch", "sync_timings"),
    reproducibility=closed("experiment_seed"),
    resources=EXPERIMENT_RESOURCES,
    retention_policy=closed("log_retention_days"),
    searcher=SEARCHER,
    security=closed(kerberos=closed("config_file")),
    slurm=SLURM,
    tensorboard_storage=TENSORBOARD_STORAGE,
)

# -- task configs (commands, notebooks, shells, TensorBoards) ----------------------------------

_TASK_ONLY = ("tensorboard_args", "idle_timeout", "notebook_idle_type", "work_dir")
TASK_RESOURCES = closed(
    "slots", "max_slots", "weight", "native_parallel", "shm_size", "resource_pool", "priority",
    "is_single_node", devices=FREE, hints={"slots_per_trial": "slots"})
TASK = closed(
    "description", "entrypoint", "debug", *_TASK_ONLY,
    what="the task config",
    bind_mounts=FREE,
    environment=closed(
        "ports", "force_pull_image", "add_capabilities", "drop_capabilities",
        pod_spec=FREE, image=FREE, environment_variables=FREE, proxy_ports=Each(PROXY_PORT),
        registry_auth=REGISTRY_AUTH),
    resources=TASK_RESOURCES,
    pbs=PBS,
    slurm=SLURM,
    hints={"slots": "resources.slots"},
)
#: What the TensorBoard launch route adds to its task's config before it reaches the service.
TENSORBOARD_EXTRA = ("experiment_ids", "trial_ids")

# -- templates: a part of either ---------------------------------------------------------------

TEMPLATE = Closed(
    {**EXPERIMENT.fields, **dict.fromkeys(_TASK_ONLY),
     "resources": closed(*_RESOURCE_KEYS, "slots", devices=Each(DEVICE))},
    what="a template's config",
)
