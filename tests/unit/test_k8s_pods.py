"""The Kubernetes objects of a task (rm._k8s_pods, pure) and the Kubernetes settings
(config._kubernetes): what the master decides wins over the user's pod spec, the user's other
parts are kept, a task never runs as root, and bad keys name themselves."""

from __future__ import annotations

import dataclasses
import json

import pytest

from det_agent.wire import BindMount, Container, Mount, RunAs, TaskSpec
from det_jupyter.config.resources import parse_resources
from det_jupyter.rm import _k8s_pods as pods
from det_jupyter.rm._kube_api import quantity_value
from det_jupyter.rm.kubernetes import _iso


def _spec(container: Container | None, *, slots: tuple[int, ...] = (0, 1), run_as: RunAs | None = None) -> TaskSpec:
    return TaskSpec(task_id="t1", allocation_id="t1.a.1", task_type="TRIAL", entrypoint="python3 train.py",
                    env={"DET_MASTER": "http://m:8080"}, slot_ids=slots, info_files={},
                    mounts=(Mount("/srv/ckpt", "/srv/ckpt"),), run_as=run_as, container=container)


def _build(spec: TaskSpec, slot_type: str = "cuda", default_pod: dict | None = None) -> tuple[dict, dict]:
    return pods.build_objects(spec, rank=0, node="n1", namespace="ns", cluster_id="c1", slot_type=slot_type,
                              cpu_per_slot=0.5, default_pod=default_pod, bootstrap=("python3", "-m", "det_agent.pod"))


def test_a_task_without_an_image_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValueError, match="environment.image"):
        _build(_spec(None))


def test_the_masters_decisions_win_and_the_users_pod_is_kept() -> None:
    user_pod = {"metadata": {"labels": {"team": "a"}}, "spec": {
        "nodeName": "elsewhere", "restartPolicy": "Always", "hostNetwork": True,
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "containers": [{"name": "determined-container", "image": "theirs:1", "env": [{"name": "X", "value": "1"}],
                        "securityContext": {"runAsUser": 0, "privileged": True}},
                       {"name": "sidecar", "image": "side:1"}],
        "volumes": [{"name": "data", "hostPath": {"path": "/data"}}]}}
    container = Container(image="team/img:2", bind_mounts=(BindMount("/data", "/data", True),), pod_spec=user_pod)
    secret, job = _build(_spec(container, run_as=RunAs(0, 0)))
    pod = job["spec"]["template"]
    ps = pod["spec"]
    assert ps["nodeName"] == "n1" and ps["restartPolicy"] == "Never"
    assert ps["hostNetwork"] is True and ps["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert ps["shareProcessNamespace"] is True and ps["automountServiceAccountToken"] is False
    ours, side = ps["containers"]
    assert side == {"name": "sidecar", "image": "side:1"}
    assert ours["image"] == "team/img:2"
    assert ours["command"] == ["python3", "-m", "det_agent.pod", "/run/det-spec/spec.json"]
    assert ours["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    # Never root, even where the owner's link or the user's pod asks for it.
    for ctx in (ours["securityContext"], ps["securityContext"]):
        assert ctx["runAsUser"] == pods.DEFAULT_UID and ctx["runAsNonRoot"] is True
    assert ours["securityContext"]["privileged"] is False
    assert ours["securityContext"]["allowPrivilegeEscalation"] is False
    paths = {m["mountPath"] for m in ours["volumeMounts"]}
    assert paths == {"/run/det-spec", "/run/determined", "/srv/ckpt", "/data"}
    assert {"name": "data", "hostPath": {"path": "/data"}} in ps["volumes"]
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["metadata"]["labels"][pods.LABEL_CLUSTER] == "c1"
    assert job["spec"]["backoffLimit"] == 0
    assert job["metadata"]["annotations"][pods.ANNOTATION_ALLOCATION] == "t1.a.1"
    # The spec the bootstrap reads: the user's container env reaches the task too.
    doc = json.loads(secret["stringData"]["spec.json"])
    assert doc["spec"]["env"] == {"X": "1", "DET_MASTER": "http://m:8080", "DET_KUBERNETES_JOB_PARALLELISM": "1"}
    assert doc["agent_id"] == "n1" and doc["slot_types"] == {"0": "cuda", "1": "cuda"}
    assert secret["metadata"]["name"] == job["metadata"]["name"] == pods.job_name("t1.a.1", 0)


def test_cpu_slots_request_cpus_and_the_owner_uid_is_used() -> None:
    _, job = _build(_spec(Container(image="img:1"), run_as=RunAs(1500, 1600)), slot_type="cpu",
                    default_pod={"spec": {"priorityClassName": "low"}})
    ps = job["spec"]["template"]["spec"]
    assert ps["priorityClassName"] == "low"  # the pool's/cluster's cpu_pod_spec
    assert ps["containers"][0]["resources"] == {"requests": {"cpu": "1000m"}}
    assert ps["securityContext"]["runAsUser"] == 1500 and ps["securityContext"]["fsGroup"] == 1600


def test_job_names_are_dns_labels_and_stable() -> None:
    name = pods.job_name("3f1c.Trial/7:x", 2)
    assert name == pods.job_name("3f1c.Trial/7:x", 2) and len(name) <= 63
    assert name.replace("-", "").isalnum() and name.islower()


def test_kubernetes_settings_parse_and_bad_keys_name_themselves() -> None:
    cfg = parse_resources({"type": "kubernetes", "namespace": "det", "slot_type": "gpu", "max_slots_per_pod": 4,
                           "determined_master_host": "det.svc", "determined_master_port": 8080},
                          [{"pool_name": "default"}, {"pool_name": "b", "kubernetes_namespace": "team-b"}],
                          {"image": "img:1", "gpu_pod_spec": {"spec": {"priorityClassName": "hi"}}})
    k8s = cfg.kubernetes
    assert k8s is not None
    assert (k8s.namespace, k8s.slot_type, k8s.max_slots_per_pod) == ("det", "cuda", 4)
    assert k8s.namespace_of("b") == "team-b" and k8s.namespace_of("default") == "det"
    assert k8s.pod_spec_for("default", True) == {"spec": {"priorityClassName": "hi"}}
    assert k8s.pod_spec_for("default", False) is None
    assert k8s.master_url() == "http://det.svc:8080"
    with pytest.raises(ValueError, match="max_slots_per_pod"):
        parse_resources({"type": "kubernetes", "max_slots_per_pod": 0})
    with pytest.raises(ValueError, match="slot_type"):
        parse_resources({"type": "kubernetes", "slot_type": "tpu"})
    with pytest.raises(ValueError, match="unknown key"):
        parse_resources({"type": "kubernetes", "namesapce": "x"})
    with pytest.raises(ValueError, match="kubernetes_namespace"):
        parse_resources({"type": "agent"}, [{"pool_name": "a", "kubernetes_namespace": "x"}])


def test_quantities_and_times() -> None:
    assert quantity_value("1500m") == 1.5 and quantity_value("2") == 2.0 and quantity_value("1Ki") == 1024
    assert _iso("2026-11-29T15:40:01.123456789Z") == "2026-11-29T15:40:01.123456Z"


class _Allocs:
    """The allocation service as the node sync sees it: nothing runs yet."""

    def live_on(self, agent_id: str) -> dict[str, list[int]]:
        return {}

    def any_pending(self) -> bool:
        return False


def _rm(**k8s: object) -> object:
    from det_jupyter.config._kubernetes import KubernetesConfig
    from det_jupyter.rm.kubernetes import KubernetesRM
    from det_jupyter.services.common.clock import FakeClock

    return KubernetesRM(_Allocs(), None, FakeClock(), k8s=KubernetesConfig(**k8s), api=None,  # type: ignore[arg-type]
                        cluster_id=lambda: "c1", resources=parse_resources(None, [{"pool_name": "default"},
                                                                                   {"pool_name": "gpu"}]))


def test_nodes_become_agents_less_what_other_pods_request() -> None:
    from det_jupyter.rm._kube_api import Node

    rm = _rm(slot_type="cpu", cpu_per_slot=0.5, max_slots_per_pod=2)
    cpu = Node("a", True, "10.0.0.1", {"cpu": "4"}, {}, "v1.20.2", False)
    gpu = Node("g", True, "10.0.0.2", {"cpu": "8"}, {"det-jupyter.ai/resource-pool": "gpu"}, "v1.20.2", False)
    down = Node("d", False, "10.0.0.3", {"cpu": "4"}, {}, "v1.20.2", False)
    rm.sync_nodes([cpu, gpu, down], {"a": {"cpu": 1.0}})  # type: ignore[attr-defined]
    agents = {a["id"]: a for a in rm.describe()}  # type: ignore[attr-defined]
    # 4 CPUs less 1 taken by others = 6 half-CPU slots, in pod-sized shares of 2.
    assert sorted(k for k in agents if k.startswith("a/")) == ["a/0", "a/1", "a/2"]
    assert all(len(agents[k]["slots"]) == 2 for k in ("a/0", "a/1", "a/2"))
    assert {agents[k]["resource_pool"] for k in agents if k.startswith("g/")} == {"gpu"}
    assert not any(k.startswith("d") for k in agents)


def test_gpu_nodes_offer_their_allocatable_gpus() -> None:
    from det_jupyter.rm._kube_api import Node

    rm = _rm(slot_type="cuda")
    rm.sync_nodes([Node("g", True, "10.0.0.2", {"cpu": "8", "nvidia.com/gpu": "4"}, {}, "v", False)],  # type: ignore[attr-defined]
                  {"g": {"nvidia.com/gpu": 1.0}})
    (agent,) = rm.describe()  # type: ignore[attr-defined]
    assert agent["id"] == "g" and [s["type"] for s in agent["slots"]] == ["cuda"] * 3


def test_long_log_lines_cut_by_docker_are_joined() -> None:
    from det_jupyter.rm._kube_api import PART, join_partials

    text = b"x" * (PART * 2 + 10)
    cut = (b"2026-11-29T16:30:01.5Z " + text[:PART] + b"2026-11-29T16:30:01.500001Z " + text[PART:2 * PART]
           + b"2026-11-29T16:30:02Z " + text[2 * PART:])
    assert join_partials(cut) == b"2026-11-29T16:30:01.5Z " + text
    short = b"2026-11-29T16:30:01.5Z hello 2026-11-29T16:30:01Z kept"
    assert join_partials(short) == short


def test_registry_auth_becomes_the_pods_image_pull_secret() -> None:
    spec = _spec(Container(image="reg.example/x:1", registry_auth={
        "username": "u", "password": "p", "serveraddress": "reg.example"}))
    secret, job = _build(spec, default_pod={"spec": {"imagePullSecrets": [{"name": "theirs"}]}})
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(secret["stringData"][".dockerconfigjson"])["auths"]
    assert auths == {"reg.example": {"username": "u", "password": "p", "auth": "dTpw"}}  # base64 "u:p"
    ps = job["spec"]["template"]["spec"]
    assert ps["imagePullSecrets"] == [{"name": "theirs"}, {"name": secret["metadata"]["name"]}]
    # The task's own volume carries its spec only, not the credentials.
    (vol,) = [v for v in ps["volumes"] if v["name"] == "det-spec"]
    assert vol["secret"]["items"] == [{"key": "spec.json", "path": "spec.json"}]
    plain, _ = _build(_spec(Container(image="x:1")))
    assert "type" in plain and plain["type"] == "Opaque" and ".dockerconfigjson" not in plain["stringData"]


def test_the_task_gets_0_38_1s_kubernetes_contract() -> None:
    """DET_KUBERNETES_POD_IP from the downward API (the user's env kept, theirs of that name
    replaced), DET_KUBERNETES_JOB_PARALLELISM: the gang's pod count, from its rendezvous file."""
    user_pod = {"spec": {"containers": [{"name": "determined-container", "env": [
        {"name": "X", "value": "1"}, {"name": "DET_KUBERNETES_POD_IP", "value": "spoofed"},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}
    rendezvous = {"container_addrs": ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "container_rank": 1,
                  "container_slot_counts": [1, 1, 1]}
    spec = dataclasses.replace(_spec(Container(image="img:1", pod_spec=user_pod)),
                               info_files={"rendezvous.json": rendezvous})
    secret, job = _build(spec)
    ours = job["spec"]["template"]["spec"]["containers"][0]
    assert ours["env"] == [
        {"name": "X", "value": "1"},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "DET_KUBERNETES_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    env = json.loads(secret["stringData"]["spec.json"])["spec"]["env"]
    assert env["DET_KUBERNETES_JOB_PARALLELISM"] == "3"
    assert pods.gang_size(_spec(Container(image="img:1"))) == 1  # no rendezvous file: one pod
