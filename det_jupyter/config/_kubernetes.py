"""``resource_manager: {type: kubernetes, …}``: 0.38.1's keys, read into ``KubernetesConfig``.

    resource_manager:
      type: kubernetes
      default_namespace: det            # (0.38.1's older name: namespace)
      max_slots_per_pod: 8              # a gang's pods hold at most this many slots each
      slot_type: cuda                   # cuda (or gpu), rocm, cpu
      slot_resource_requests: {cpu: 2}  # with slot_type cpu: one slot is this many CPUs
      kubeconfig_path: ~/.kube/config   # empty: in-cluster
      determined_master_scheme: http    # how pods reach the master
      determined_master_host: det-master.det.svc
      determined_master_port: 8080
    resource_pools:
      - pool_name: default
        kubernetes_namespace: team-a    # the pool's tasks run there
    task_container_defaults:
      cpu_pod_spec: {…}                 # merged under every CPU task's pod
      gpu_pod_spec: {…}

Pure: every error names the key and what to write instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: resource_manager keys of a kubernetes resource manager (0.38.1's; ``namespace`` is the
#: older name of ``default_namespace``).
KEYS = frozenset({
    "type", "namespace", "default_namespace", "max_slots_per_pod", "slot_type", "slot_resource_requests",
    "kubeconfig_path", "determined_master_scheme", "determined_master_host", "determined_master_port",
    "default_scheduler", "cluster_name", "name", "master_service_name", "leave_kubernetes_resources",
    "fluent", "metadata", "default_aux_resource_pool", "default_compute_resource_pool",
    "no_default_resource_pools", "scheduler", "internal_task_gateway",
})
SLOT_TYPES = {"cuda": "cuda", "gpu": "cuda", "rocm": "rocm", "cpu": "cpu"}
#: The node label that puts a node in a resource pool (unlabelled nodes: the default pool).
POOL_LABEL = "det-jupyter.ai/resource-pool"


@dataclass(frozen=True)
class KubernetesConfig:
    namespace: str = "default"
    max_slots_per_pod: int | None = None
    slot_type: str = "cuda"
    cpu_per_slot: float = 1.0
    kubeconfig_path: str = ""
    master_scheme: str = "http"
    master_host: str = ""
    master_port: int | None = None
    default_scheduler: str = ""
    cluster_name: str = ""
    #: pool name -> its namespace (``resource_pools[].kubernetes_namespace``)
    pool_namespaces: Mapping[str, str] = field(default_factory=dict)
    #: ``task_container_defaults.cpu_pod_spec`` / ``gpu_pod_spec`` (cluster-wide, then per pool)
    pod_specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pool_pod_specs: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)

    def namespace_of(self, pool: str) -> str:
        return self.pool_namespaces.get(pool) or self.namespace

    def pod_spec_for(self, pool: str, gpu: bool) -> Mapping[str, Any] | None:
        """The default pod spec of a task in ``pool``: the pool's own, else the cluster's."""
        key = "gpu_pod_spec" if gpu else "cpu_pod_spec"
        own = self.pool_pod_specs.get(pool)
        if own is not None and key in own:
            return own[key]
        return self.pod_specs.get(key)

    def master_url(self) -> str | None:
        """The master's URL as pods reach it; None: the master's own (``--master-url``)."""
        if not self.master_host:
            return None
        port = f":{self.master_port}" if self.master_port else ""
        return f"{self.master_scheme}://{self.master_host}{port}"


def pod_specs(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """``cpu_pod_spec``/``gpu_pod_spec`` of a ``task_container_defaults`` mapping."""
    out: dict[str, Mapping[str, Any]] = {}
    if not isinstance(raw, Mapping):
        return out
    for key in ("cpu_pod_spec", "gpu_pod_spec"):
        spec = raw.get(key)
        if spec is None:
            continue
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}.{key} must be a Kubernetes pod (a mapping with spec:), got {spec!r}")
        out[key] = spec
    return out


def parse_kubernetes(rm: Mapping[str, Any], pools: list[Any], tcd: Any) -> KubernetesConfig:
    """The kubernetes resource manager's settings (``rm``: resource_manager; ``pools``: the
    resource_pools entries; ``tcd``: the top-level task_container_defaults)."""
    unknown = sorted(set(rm) - KEYS)
    if unknown:
        raise ValueError(f"resource_manager: unknown key(s) {', '.join(unknown)} for type kubernetes; "
                         f"allowed: {', '.join(sorted(KEYS))}")
    namespace = rm.get("default_namespace") or rm.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ValueError(f"resource_manager.default_namespace must be a namespace name, got {namespace!r}")
    per_pod = rm.get("max_slots_per_pod")
    if per_pod is not None and (not isinstance(per_pod, int) or isinstance(per_pod, bool) or per_pod < 1):
        raise ValueError(f"resource_manager.max_slots_per_pod must be a positive integer, got {per_pod!r}")
    slot_type = SLOT_TYPES.get(str(rm.get("slot_type") or "cuda").lower())
    if slot_type is None:
        raise ValueError(f"resource_manager.slot_type must be one of cuda, gpu, rocm, cpu, got {rm['slot_type']!r}")
    requests = rm.get("slot_resource_requests") or {}
    if not isinstance(requests, Mapping) or set(requests) - {"cpu"}:
        raise ValueError("resource_manager.slot_resource_requests must be a mapping with cpu: <CPUs per slot>")
    cpu = requests.get("cpu", 1)
    if not isinstance(cpu, (int, float)) or isinstance(cpu, bool) or cpu <= 0:
        raise ValueError(f"resource_manager.slot_resource_requests.cpu must be a positive number, got {cpu!r}")
    port = rm.get("determined_master_port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536):
        raise ValueError(f"resource_manager.determined_master_port must be a port number, got {port!r}")
    scheme = rm.get("determined_master_scheme") or "http"
    if scheme not in ("http", "https"):
        raise ValueError(f"resource_manager.determined_master_scheme must be http or https, got {scheme!r}")
    pool_namespaces: dict[str, str] = {}
    pool_specs: dict[str, Mapping[str, Mapping[str, Any]]] = {}
    for i, entry in enumerate(pools):
        if not isinstance(entry, Mapping):
            continue
        ns = entry.get("kubernetes_namespace")
        if ns is not None:
            if not isinstance(ns, str) or not ns:
                raise ValueError(f"resource_pools[{i}].kubernetes_namespace must be a namespace name, got {ns!r}")
            pool_namespaces[str(entry.get("pool_name"))] = ns
        own = pod_specs(entry.get("task_container_defaults"), f"resource_pools[{i}].task_container_defaults")
        if own:
            pool_specs[str(entry.get("pool_name"))] = own
    return KubernetesConfig(
        namespace=namespace, max_slots_per_pod=per_pod, slot_type=slot_type, cpu_per_slot=float(cpu),
        kubeconfig_path=str(rm.get("kubeconfig_path") or ""), master_scheme=scheme,
        master_host=str(rm.get("determined_master_host") or ""), master_port=port,
        default_scheduler=str(rm.get("default_scheduler") or ""),
        cluster_name=str(rm.get("cluster_name") or rm.get("name") or ""),
        pool_namespaces=pool_namespaces, pod_specs=pod_specs(tcd, "task_container_defaults"),
        pool_pod_specs=pool_specs)
