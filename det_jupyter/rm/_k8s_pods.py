"""Kubernetes objects of one container of an allocation (pure): a Secret holding its task spec,
and a batch/v1 Job whose one pod runs the spec through ``python3 -m det_agent.pod`` on the node
the master placed it on.

The pod is the user's ``environment.pod_spec`` (else the pool's or cluster's
``cpu_pod_spec``/``gpu_pod_spec``), with the master's parts merged in as 0.38.1 merges them: the
container named ``determined-container`` gets the image, the command, the slots' resources and
the volumes; the user's other containers, volumes, labels, node selectors, tolerations and so
on are kept. What the master decides wins over what the user's pod says: the node (the master
places; no Kubernetes scheduler decides, so a gang is created only when all of it fits), the
restart policy, the run-as user (the owner's linked uid/gid, else an unprivileged one; never
root), no privilege escalation.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from det_agent.wire import TaskSpec

CONTAINER = "determined-container"  # 0.38.1's name: users' pod specs refer to it
LABEL_CLUSTER = "det-jupyter.ai/cluster"
LABEL_ALLOCATION = "det-jupyter.ai/allocation"  # a hash: label values are short
LABEL_RANK = "det-jupyter.ai/rank"
ANNOTATION_ALLOCATION = "det-jupyter.ai/allocation-id"
ANNOTATION_TASK = "det-jupyter.ai/task-id"
SPEC_DIR = "/run/det-spec"
RUN_DIR = "/run/determined"
#: Whom a task runs as when its owner is linked to no account: nobody, never root.
DEFAULT_UID = DEFAULT_GID = 65534
POD_IP_ENV = "DET_KUBERNETES_POD_IP"
GPU_RESOURCE = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}


def allocation_label(allocation_id: str) -> str:
    return hashlib.sha256(allocation_id.encode()).hexdigest()[:40]


def job_name(allocation_id: str, rank: int) -> str:
    """A DNS-1123 name of the allocation's container ``rank`` (stable, so a restarted master
    finds it)."""
    return f"det-{allocation_label(allocation_id)[:16]}-{rank}"


def merge_pod_specs(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of the user's pod (``{metadata, spec}``), or an empty one."""
    pod = copy.deepcopy(dict(user or {}))
    pod.setdefault("metadata", {})
    pod.setdefault("spec", {})
    return pod


def _our_container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec.setdefault("containers", [])
    for c in containers:
        if c.get("name") == CONTAINER:
            return dict(c)
    return {"name": CONTAINER}


def _merge_resources(theirs: Mapping[str, Any] | None, ours: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: dict(v) for k, v in (theirs or {}).items() if isinstance(v, Mapping)}
    for kind, values in ours.items():
        out.setdefault(kind, {}).update(values)
    return out


def user_env(pod: Mapping[str, Any]) -> dict[str, str]:
    """The plain ``env`` of the user's ``determined-container`` (name/value pairs): the task
    gets them too (the bootstrap builds the task's environment from its spec)."""
    for c in (pod.get("spec") or {}).get("containers") or ():
        if isinstance(c, Mapping) and c.get("name") == CONTAINER:
            return {str(e["name"]): str(e.get("value", "")) for e in c.get("env") or ()
                    if isinstance(e, Mapping) and "name" in e and "valueFrom" not in e}
    return {}


def gang_size(spec: TaskSpec) -> int:
    """How many pods the allocation of ``spec`` has (0.38.1's ``DET_KUBERNETES_JOB_PARALLELISM``,
    its all-gather's ``numPeers``): the containers its rendezvous file lists."""
    rendezvous = (spec.info_files or {}).get("rendezvous.json") or {}
    return max(1, len(rendezvous.get("container_addrs") or ()))


def pod_env(theirs: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The ``env`` of our container: the user's (the bootstrap passes only the plain ones on,
    through the spec: :func:`user_env`) and the pod's IP from the downward API, which the
    bootstrap passes on to the task as 0.38.1's ``DET_KUBERNETES_POD_IP`` (its rendezvous and
    proxy address)."""
    kept = [dict(e) for e in theirs or () if isinstance(e, Mapping) and e.get("name") != POD_IP_ENV]
    return kept + [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def spec_document(spec: TaskSpec, *, agent_id: str, slot_type: str, extra_env: Mapping[str, str]) -> str:
    """The Secret's ``spec.json`` (``det_agent.pod``'s input)."""
    wire = spec.to_wire()
    env = {**dict(extra_env), **wire["env"]}
    shared = env.get("DET_SHARED_FS_HOST_PATH")  # the host's directory: in the pod, its mount's
    for m in spec.mounts:
        if shared and m.host_path == shared:
            env["DET_SHARED_FS_HOST_PATH"] = m.container_path
    env["DET_KUBERNETES_JOB_PARALLELISM"] = str(gang_size(spec))
    wire["env"] = env
    return json.dumps({"spec": wire, "agent_id": agent_id,
                       "slot_types": {str(i): slot_type for i in spec.slot_ids}, "run_dir": RUN_DIR})


def build_objects(
    spec: TaskSpec, *, rank: int, node: str, namespace: str, cluster_id: str, slot_type: str,
    cpu_per_slot: float, default_pod: Mapping[str, Any] | None, bootstrap: Sequence[str],
    default_scheduler: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(secret, job)`` manifests of container ``rank`` of ``spec``'s allocation on ``node``.
    ValueError when the task cannot run on Kubernetes (it names no image)."""
    container = spec.container
    if container is None:
        raise ValueError("on Kubernetes every task runs in an image, and this one names none: set "
                         "environment.image in its config, or task_container_defaults.image in master.yaml")
    name = job_name(spec.allocation_id, rank)
    labels = {LABEL_CLUSTER: cluster_id, LABEL_ALLOCATION: allocation_label(spec.allocation_id),
              LABEL_RANK: str(rank)}
    annotations = {ANNOTATION_ALLOCATION: spec.allocation_id, ANNOTATION_TASK: spec.task_id}
    pod = merge_pod_specs(container.pod_spec if container.pod_spec is not None else default_pod)
    data = {"spec.json": spec_document(spec, agent_id=node, slot_type=slot_type, extra_env=user_env(pod))}
    if container.registry_auth is not None:  # the same Secret: no second object to create and delete
        data[".dockerconfigjson"] = docker_config_json(container.registry_auth)
    secret = {
        "apiVersion": "v1", "kind": "Secret",
        "type": "Opaque" if container.registry_auth is None else "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "stringData": data,
    }
    uid, gid = (spec.run_as.uid, spec.run_as.gid) if spec.run_as is not None else (DEFAULT_UID, DEFAULT_GID)
    if uid == 0:  # a task is never root here
        uid, gid = DEFAULT_UID, DEFAULT_GID
    slots = len(spec.slot_ids)
    ours: dict[str, dict[str, str]] = {}
    if slots and slot_type in GPU_RESOURCE:
        ours = {"limits": {GPU_RESOURCE[slot_type]: str(slots)}, "requests": {GPU_RESOURCE[slot_type]: str(slots)}}
    elif slots:
        ours = {"requests": {"cpu": f"{int(cpu_per_slot * slots * 1000)}m"}}
    volumes: list[dict[str, Any]] = [
        {"name": "det-spec", "secret": {"secretName": name, "defaultMode": 0o440,
                                        "items": [{"key": "spec.json", "path": "spec.json"}]}},
        {"name": "det-run", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [{"name": "det-spec", "mountPath": SPEC_DIR, "readOnly": True},
              {"name": "det-run", "mountPath": RUN_DIR}]
    host_mounts = [(m.host_path, m.container_path, False) for m in spec.mounts] + [
        (b.host_path, b.container_path, b.read_only) for b in container.bind_mounts]
    for i, (host, inside, read_only) in enumerate(host_mounts):
        volumes.append({"name": f"det-host-{i}", "hostPath": {"path": host}})
        mounts.append({"name": f"det-host-{i}", "mountPath": inside, "readOnly": read_only})
    if container.shm_size:
        volumes.append({"name": "det-shm", "emptyDir": {"medium": "Memory", "sizeLimit": str(container.shm_size)}})
        mounts.append({"name": "det-shm", "mountPath": "/dev/shm"})

    ps = pod["spec"]
    ours_c = _our_container(ps)
    # A path the user's pod already mounts keeps the user's volume (two mounts at one path
    # would make the pod invalid).
    taken = {m.get("mountPath") for m in ours_c.get("volumeMounts") or ()}
    kept = [(v, m) for v, m in zip(volumes, mounts, strict=True) if m["mountPath"] not in taken]
    volumes, mounts = [v for v, _ in kept], [m for _, m in kept]
    ours_c.update({
        "name": CONTAINER, "image": container.image,
        "imagePullPolicy": "Always" if container.force_pull else ours_c.get("imagePullPolicy", "IfNotPresent"),
        "command": list(bootstrap) + [f"{SPEC_DIR}/spec.json"], "args": [],
        "env": pod_env(ours_c.get("env")),
        "resources": _merge_resources(ours_c.get("resources"), ours),
        "volumeMounts": list(ours_c.get("volumeMounts") or []) + mounts,
        "securityContext": {**dict(ours_c.get("securityContext") or {}), "runAsUser": uid, "runAsGroup": gid,
                            "runAsNonRoot": True, "allowPrivilegeEscalation": False, "privileged": False},
    })
    ps["containers"] = [ours_c] + [c for c in ps.get("containers") or [] if c.get("name") != CONTAINER]
    ps["volumes"] = list(ps.get("volumes") or []) + volumes
    ps["restartPolicy"] = "Never"
    ps["nodeName"] = node
    ps["automountServiceAccountToken"] = bool(ps.get("automountServiceAccountToken", False))
    ps["securityContext"] = {**dict(ps.get("securityContext") or {}), "runAsUser": uid, "runAsGroup": gid,
                             "fsGroup": gid, "runAsNonRoot": True}
    ps.setdefault("terminationGracePeriodSeconds", 10)
    # The pod's pause container is pid 1, so the task gets the SIGTERM of a kill or a
    # preemption (a pid-1 Python would ignore it until the SIGKILL).
    ps.setdefault("shareProcessNamespace", True)
    if default_scheduler:
        ps.setdefault("schedulerName", default_scheduler)
    if container.registry_auth is not None:
        ps["imagePullSecrets"] = [*(ps.get("imagePullSecrets") or []), {"name": name}]
    meta = pod["metadata"]
    meta["labels"] = {**dict(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**dict(meta.get("annotations") or {}), **annotations}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod},
    }
    return secret, job


def docker_config_json(auth: Mapping[str, str]) -> str:
    """Docker's auth config (``environment.registry_auth``: username, password, serveraddress,
    auth, …) as the ``.dockerconfigjson`` of an image pull Secret."""
    server = auth.get("serveraddress") or "https://index.docker.io/v1/"
    entry = {k: v for k, v in auth.items() if k in ("username", "password", "email", "auth")}
    if "auth" not in entry and "username" in entry:
        entry["auth"] = base64.b64encode(f"{entry['username']}:{entry.get('password', '')}".encode()).decode()
    return json.dumps({"auths": {server: entry}})
