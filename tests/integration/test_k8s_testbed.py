"""The Kubernetes test bed itself (scripts/k8s/, tests/_k8s.py): a node that is Ready, pods
that run and log, the scheduler's view of an extended resource (nvidia.com/gpu) and a pod
running the host's python3 from the host's /usr mounted read-only. These are the features
later Kubernetes tests lean on; each check takes a few seconds once the cluster is up."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests._k8s import Cluster

pytest.importorskip("kubernetes", reason="the Kubernetes tests need the kubernetes client (pip install -e '.[test]')")
# The first test's setup may build the test bed cold (~9 min on 2 cores, scripts/k8s/build.sh).
pytestmark = pytest.mark.timeout(1200)

GPU = "nvidia.com/gpu"
POD_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def v1(k8s_cluster: Cluster) -> Any:
    return k8s_cluster.core_v1()


@pytest.fixture
def pods(v1: Any) -> Iterator[Callable[[dict[str, Any]], str]]:
    """Create pods in ``default`` from a spec (gets a unique name); delete them afterwards."""
    made: list[str] = []

    def create(spec: dict[str, Any]) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        v1.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod",
                                             "metadata": {"name": name}, "spec": spec})
        made.append(name)
        return name

    yield create
    for name in made:
        v1.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def until(check: Callable[[], Any], what: str, timeout: float = POD_TIMEOUT) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g} s")
        time.sleep(0.25)


def finished(v1: Any, name: str) -> Any:
    """The pod once it has Succeeded or Failed."""
    def phase() -> Any:
        pod = v1.read_namespaced_pod(name, "default")
        return pod if pod.status.phase in ("Succeeded", "Failed") else None
    return until(phase, f"end of pod {name}")


def test_the_node_is_ready(v1: Any, k8s_cluster: Cluster) -> None:
    node = v1.read_node(k8s_cluster.node)
    ready = {c.type: c.status for c in node.status.conditions}["Ready"]
    assert ready == "True"
    assert node.status.node_info.kubelet_version == "v1.20.2"
    assert {(a.type, a.address) for a in node.status.addresses} >= {("InternalIP", "127.0.0.1")}


def test_a_host_network_pod_runs_and_its_log_reads_back(v1: Any, pods: Callable[[dict[str, Any]], str]) -> None:
    name = pods({"hostNetwork": True, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox:1.35", "imagePullPolicy": "Never",
                                 "command": ["sh", "-c", "echo hello from $(hostname)"]}]})
    pod = finished(v1, name)
    assert pod.status.phase == "Succeeded"
    assert v1.read_namespaced_pod_log(name, "default").startswith("hello from ")


def test_a_pod_asking_for_more_gpus_than_the_node_has_stays_pending(
        v1: Any, k8s_cluster: Cluster, pods: Callable[[dict[str, Any]], str]) -> None:
    # The kubelet keeps an extended resource that is patched into the node's status.
    one = {"capacity": {GPU: "1"}, "allocatable": {GPU: "1"}}
    v1.patch_node_status(k8s_cluster.node, {"status": one})
    try:
        until(lambda: v1.read_node(k8s_cluster.node).status.allocatable.get(GPU) == "1", "1 GPU on the node")
        name = pods({"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox:1.35", "imagePullPolicy": "Never",
                                     "command": ["true"], "resources": {"limits": {GPU: "2"}}}]})

        def unschedulable() -> Any:
            pod = v1.read_namespaced_pod(name, "default")
            return next((c for c in pod.status.conditions or ()
                         if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)

        condition = until(unschedulable, f"Unschedulable condition on pod {name}")
        assert f"Insufficient {GPU}" in condition.message
        assert v1.read_namespaced_pod(name, "default").status.phase == "Pending"
    finally:
        gone = {"capacity": {GPU: None}, "allocatable": {GPU: None}}
        v1.patch_node_status(k8s_cluster.node, {"status": gone})


def test_a_pod_runs_the_hosts_python_from_a_read_only_usr(v1: Any, pods: Callable[[dict[str, Any]], str]) -> None:
    name = pods({"restartPolicy": "Never",
                 "volumes": [{"name": "usr", "hostPath": {"path": "/usr", "type": "Directory"}}],
                 "containers": [{"name": "main", "image": "local/hostusr:1", "imagePullPolicy": "Never",
                                 "command": ["python3", "-c", "print(1)"],
                                 "volumeMounts": [{"name": "usr", "mountPath": "/usr", "readOnly": True}]}]})
    pod = finished(v1, name)
    log = v1.read_namespaced_pod_log(name, "default")
    assert pod.status.phase == "Succeeded", log
    assert log.strip() == "1"
