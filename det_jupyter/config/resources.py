"""The cluster's resource configuration: ``resource_manager`` and ``resource_pools`` of master.yaml.

The same keys as Determined's master.yaml (contract §4.4), parsed into frozen records:

    resource_manager:
      type: agent
      default_compute_resource_pool: gpu      # tasks that need slots
      default_aux_resource_pool: cpu          # zero-slot tasks
      scheduler: {type: priority, fitting_policy: best, preemption: false, default_priority: 42}
    resource_pools:
      - pool_name: gpu
        description: the A100 boxes
        scheduler: {type: fair_share}         # all or nothing: unset fields take the defaults
      - pool_name: cpu

A pool's ``scheduler`` replaces the resource manager's as a whole, as in Determined (an unset
``type`` there means priority, not the manager's type). Every error names the key and what to
write instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from det_jupyter import scheduler
from det_jupyter.errors import DetError

from ._container_defaults import container_defaults
from ._kubernetes import KubernetesConfig, parse_kubernetes
from ._yaml import load_yaml

DEFAULT_PRIORITY = 42
SCHEDULER_TYPES = tuple(scheduler.POLICIES)
# The wire names of GET /api/v1/resource-pools (v1SchedulerType, v1FittingPolicy).
WIRE_SCHEDULER = {
    "priority": "SCHEDULER_TYPE_PRIORITY",
    "fair_share": "SCHEDULER_TYPE_FAIR_SHARE",
    "round_robin": "SCHEDULER_TYPE_ROUND_ROBIN",
}
WIRE_FITTING = {"best": "FITTING_POLICY_BEST", "worst": "FITTING_POLICY_WORST"}


@dataclass(frozen=True)
class SchedulerConfig:
    type: str = "priority"
    fitting_policy: str = "best"
    preemption: bool = False
    default_priority: int = DEFAULT_PRIORITY

    def policy(self) -> scheduler.Policy:
        return scheduler.make_policy(
            self.type, fitting=self.fitting_policy, preemption=self.preemption
        )


@dataclass(frozen=True)
class PoolConfig:
    name: str
    description: str = ""
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    #: Its own ``task_container_defaults`` (a task-config fragment), which replaces the
    #: cluster's as in 0.38.1; None: the cluster's.
    task_container_defaults: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ResourceConfig:
    pools: Mapping[str, PoolConfig]
    default_compute_pool: str
    default_aux_pool: str
    #: master.yaml's top-level ``task_container_defaults`` (a task-config fragment).
    task_container_defaults: Mapping[str, Any] | None = None
    #: ``resource_manager.type: kubernetes``: its settings (None: agents).
    kubernetes: KubernetesConfig | None = None

    def container_defaults_for(self, requested: str, slots: int) -> Mapping[str, Any] | None:
        """The ``task_container_defaults`` fragment of the pool a task runs in: the pool's
        own, else the cluster's."""
        pool = self.pools.get(self.pool_for(requested, slots))
        if pool is not None and pool.task_container_defaults is not None:
            return pool.task_container_defaults
        return self.task_container_defaults

    def pool_for(self, requested: str, slots: int) -> str:
        """The pool a task runs in: the one it names, else the default for its kind."""
        if requested:
            return requested
        return self.default_compute_pool if slots > 0 else self.default_aux_pool

    def check_pool(self, name: str, what: str = "resources.resource_pool") -> None:
        if name and name not in self.pools:
            raise ValueError(
                f"{what}: resource pool {name!r} does not exist; "
                f"the pools are {', '.join(sorted(self.pools))}"
            )


def parse_resources(
    resource_manager: Mapping[str, Any] | None, resource_pools: Any = None,
    task_container_defaults: Any = None,
) -> ResourceConfig:
    """Build the configuration; with nothing given, one pool "default" on the priority policy
    (``task_container_defaults``: master.yaml's top-level key, checked here)."""
    rm = dict(resource_manager or {})
    kind = rm.get("type", "agent")
    if kind not in ("agent", "kubernetes"):
        raise ValueError(f"resource_manager.type must be agent or kubernetes, got {kind!r}")
    if kind == "agent":
        _only(rm, {"type", "default_compute_resource_pool", "default_aux_resource_pool", "scheduler",
                   "cluster_name", "no_default_resource_pools"}, "resource_manager")
    base = _scheduler(rm.get("scheduler"), "resource_manager.scheduler")
    pools: dict[str, PoolConfig] = {}
    if resource_pools is None:
        resource_pools = [{"pool_name": scheduler.DEFAULT_POOL}]
    if not isinstance(resource_pools, list) or not resource_pools:
        raise ValueError("resource_pools must be a non-empty list of {pool_name: ...} entries")
    for i, entry in enumerate(resource_pools):
        where = f"resource_pools[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} must be a mapping with pool_name, got {entry!r}")
        _only(entry, {"pool_name", "description", "scheduler", "provider",
                      "max_aux_containers_per_agent", "task_container_defaults",
                      "agent_reattach_enabled", "agent_reconnect_wait"}
              | ({"kubernetes_namespace"} if kind == "kubernetes" else set()), where)
        name = entry.get("pool_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.pool_name must be a non-empty string")
        if name in pools:
            raise ValueError(f"{where}.pool_name: pool {name!r} is defined twice")
        sched = base if entry.get("scheduler") is None else _scheduler(
            entry["scheduler"], f"{where}.scheduler")
        tcd = entry.get("task_container_defaults")
        pools[name] = PoolConfig(
            name, str(entry.get("description") or ""), sched,
            None if tcd is None else container_defaults(tcd, f"{where}.task_container_defaults"))
    first = next(iter(pools))
    compute = rm.get("default_compute_resource_pool") or (
        scheduler.DEFAULT_POOL if scheduler.DEFAULT_POOL in pools else first)
    aux = rm.get("default_aux_resource_pool") or compute
    for key, value in (("default_compute_resource_pool", compute), ("default_aux_resource_pool", aux)):
        if value not in pools:
            raise ValueError(
                f"resource_manager.{key}: pool {value!r} is not among resource_pools "
                f"({', '.join(pools)})"
            )
    cluster = None if task_container_defaults is None else container_defaults(task_container_defaults)
    k8s = parse_kubernetes(rm, resource_pools, task_container_defaults) if kind == "kubernetes" else None
    return ResourceConfig(pools, compute, aux, cluster, k8s)


def _scheduler(raw: Any, where: str) -> SchedulerConfig:
    if raw is None:
        return SchedulerConfig()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping (type, fitting_policy, ...), got {raw!r}")
    _only(raw, {"type", "fitting_policy", "preemption", "default_priority",
                "allow_heterogeneous_fits"}, where)
    kind = raw.get("type") or "priority"
    if kind not in SCHEDULER_TYPES:
        raise ValueError(f"{where}.type must be one of {', '.join(SCHEDULER_TYPES)}, got {kind!r}")
    fitting = raw.get("fitting_policy") or "best"
    if fitting not in scheduler.FITTINGS:
        raise ValueError(f"{where}.fitting_policy must be best or worst, got {fitting!r}")
    preemption = raw.get("preemption")
    if preemption is not None and not isinstance(preemption, bool):
        raise ValueError(f"{where}.preemption must be true or false, got {preemption!r}")
    if kind == "fair_share":
        if preemption is False:
            raise ValueError(f"{where}.preemption: the fair_share scheduler always preempts")
        preemption = True
    elif kind == "round_robin" and preemption:
        raise ValueError(f"{where}.preemption: the round_robin scheduler does not preempt")
    priority = raw.get("default_priority", DEFAULT_PRIORITY)
    if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 99:
        raise ValueError(f"{where}.default_priority must be an integer from 1 to 99, got {priority!r}")
    return SchedulerConfig(kind, fitting, bool(preemption), priority)


def _only(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def load_master_config(text: str) -> ResourceConfig:
    """Parse a master.yaml; keys other than the resource ones are accepted and ignored here."""
    try:
        raw = load_yaml(text, what="the master config") or {}
    except DetError as exc:  # bad YAML, aliases that fan out, nesting, size
        raise ValueError(exc.message) from None
    if not isinstance(raw, Mapping):
        raise ValueError("the master config must be a mapping of settings")
    rm = raw.get("resource_manager")
    if rm is not None and not isinstance(rm, Mapping):
        raise ValueError("resource_manager must be a mapping")
    return parse_resources(rm, raw.get("resource_pools"), raw.get("task_container_defaults"))
