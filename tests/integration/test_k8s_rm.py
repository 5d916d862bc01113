"""Issue 31 (first part): the Kubernetes resource manager against a real single-node Kubernetes
(tests/_k8s.py, scripts/k8s/): a master with ``resource_manager: {type: kubernetes}`` and no
agent runs our Core API counter experiment as Jobs, with checkpoints; its node shows as an
agent; an over-large request waits with a reason instead of being created; a kill deletes the
running Job; an image that cannot be pulled fails the trial, saying so; an evicted pod's trial
resumes from its checkpoint; a master restart adopts the running Jobs; registry_auth is the
pod's pull secret.

The pods run the registry-free ``local/hostusr:1`` image with the host's ``/usr`` read-only
(Debian's python3) and this checkout (det_agent's bootstrap, the harness) and the test venv's
site-packages lent read-only at /opt/det, through ``task_container_defaults.cpu_pod_spec``,
as a user's pod spec would add volumes; ``hostNetwork`` lets them reach the master on
127.0.0.1 (the test bed has no CNI).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterator

import pytest
import yaml

from det_jupyter.rm import _k8s_pods as pods
from tests import _k8s
from tests._k8s import Cluster
from tests._master import MasterProcess, create_experiment, wait_experiment, wait_for
from tests.integration._exp import (
    COUNTER,
    counter_config,
    submit_counter,
    task_log_text,
    trial_log_text,
    trials,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

IMAGE = "local/hostusr:1"
CPU_PER_SLOT = 0.25  # the test bed's node has 2 CPUs: 8 slots


@pytest.fixture(scope="module")
def namespace(k8s_cluster: Cluster) -> Iterator[str]:
    with _k8s.namespace(k8s_cluster) as name:
        yield name


@pytest.fixture(scope="module")
def k8s_master(k8s_cluster: Cluster, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    with _k8s.k8s_master(k8s_cluster, tmp_path_factory.mktemp("k8s-master"), namespace,
                         slot_resource_requests={"cpu": CPU_PER_SLOT}, max_slots_per_pod=8) as master:
        yield master


def test_the_node_is_an_agent_with_slots(k8s_master: MasterProcess, k8s_cluster: Cluster) -> None:
    admin = k8s_master.admin()
    # 2 CPUs of quarter-CPU slots, less what other tests' pods on the shared node request.
    expected = lambda: math.floor(_k8s.free_cpus(k8s_cluster) / CPU_PER_SLOT + 1e-9)  # noqa: E731
    agents = wait_for(lambda: (a := admin.get("/api/v1/agents")["agents"]) and len(a[0]["slots"]) == expected() and a,
                      timeout=30, what=f"the node as an agent with {expected()} slots")
    (node,) = agents
    assert node["id"] == k8s_cluster.node and 0 < len(node["slots"]) <= int(2 / CPU_PER_SLOT)
    assert admin.get("/api/v1/k8s-resource-managers") == {"resourceManagers": ["default"]}
    assert {p["type"] for p in admin.get("/api/v1/resource-pools")["resourcePools"]} == {"RESOURCE_POOL_TYPE_K8S"}


def test_a_core_api_experiment_trains_in_pods_with_checkpoints(k8s_master: MasterProcess) -> None:
    admin = k8s_master.admin()
    exp = submit_counter(admin, length=8, sleep=0.05, ckpt_every=4)
    state = wait_experiment(admin, exp, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=240)
    (trial,) = trials(admin, exp)
    log = trial_log_text(admin, trial["id"])
    assert state == "STATE_COMPLETED", log[-3000:]
    assert trial["totalBatchesProcessed"] == 8
    ckpts = admin.get(f"/api/v1/experiments/{exp}/checkpoints")["checkpoints"]
    assert ckpts and all(c["state"] == "STATE_COMPLETED" for c in ckpts), ckpts
    # Its pod's log, read through the Kubernetes API, is the trial's log (there is no agent).
    assert "run 1 starting at step 0" in log and "done" in log, log[-2000:]


def test_an_over_large_request_waits_with_a_reason(k8s_master: MasterProcess, k8s_cluster: Cluster,
                                                   namespace: str) -> None:
    admin = k8s_master.admin()
    cfg = yaml.safe_load(counter_config(length=2, sleep=0.01))
    cfg["resources"] = {"slots_per_trial": 64}
    exp = create_experiment(admin, yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]
    try:
        def queued() -> dict | None:
            jobs = [j["full"] for j in admin.get("/api/v1/job-queues-v2")["jobs"]]
            return next((j for j in jobs if j.get("waitReason") and j["summary"]["state"] == "STATE_QUEUED"), None)

        job = wait_for(queued, timeout=30, what="the job queued with a reason")
        # At most 8 slots: other tests' pods may hold some (test_k8s_reasons.py checks the rest).
        assert re.match(rf"needs 64 slots but the largest pool \(default\) has [0-{int(2 / CPU_PER_SLOT)}] "
                        rf"\(Kubernetes: insufficient cpu on every node: {k8s_cluster.node} 2 allocatable",
                        job["waitReason"]), job["waitReason"]
        # Nothing was created in the cluster for it.
        assert not k8s_cluster_jobs(k8s_cluster, namespace)
    finally:
        admin.post(f"/api/v1/experiments/{exp}/kill")


def k8s_cluster_jobs(cluster: Cluster, namespace: str) -> list[str]:
    from kubernetes import client, config

    batch = client.BatchV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    return [j.metadata.name for j in batch.list_namespaced_job(namespace).items]


def test_killing_a_running_trial_deletes_its_job(k8s_master: MasterProcess, k8s_cluster: Cluster,
                                                 namespace: str) -> None:
    admin = k8s_master.admin()
    exp = submit_counter(admin, length=10_000, sleep=0.05)
    wait_for(lambda: (ts := trials(admin, exp)) and ts[0]["state"] == "STATE_RUNNING", timeout=120,
             what="the trial running in its pod")
    assert k8s_cluster_jobs(k8s_cluster, namespace)
    admin.post(f"/api/v1/experiments/{exp}/kill")
    wait_experiment(admin, exp, {"STATE_CANCELED"}, timeout=60)
    wait_for(lambda: not k8s_cluster_jobs(k8s_cluster, namespace), timeout=60, what="its Job deleted")


def test_an_image_that_cannot_be_pulled_fails_saying_so(k8s_master: MasterProcess) -> None:
    admin = k8s_master.admin()
    cmd = admin.post("/api/v1/commands", {"config": {
        "entrypoint": ["true"], "environment": {"image": "registry.invalid/nothing:1"}}})["command"]
    wait_for(lambda: admin.get(f"/api/v1/commands/{cmd['id']}")["command"]["state"] == "STATE_TERMINATED",
             timeout=120, what="the command's end")
    log = task_log_text(admin, cmd["id"])
    assert "the image could not be pulled" in log, log[-2000:]


def _jobs_by_task(cluster: Cluster, namespace: str) -> dict[str, str]:
    """The namespace's Jobs by the task id they run (our annotation): Job name."""
    from kubernetes import client, config

    batch = client.BatchV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    return {(j.metadata.annotations or {}).get(pods.ANNOTATION_TASK, ""): j.metadata.name
            for j in batch.list_namespaced_job(namespace).items}


def _orphan_job(cluster: Cluster, namespace: str, cluster_id: str) -> str:
    """A Job with this cluster's label that no allocation owns (as one left by a lost create)."""
    from kubernetes import client, config

    batch = client.BatchV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    name = "det-orphan-0"
    batch.create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {pods.LABEL_CLUSTER: cluster_id}},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "hostNetwork": True,
            "containers": [{"name": "c", "image": "busybox:1.35", "command": ["sleep", "600"]}]}}}})
    return name


def _runs(admin: object, trial_id: int) -> list[str]:
    return [ln for ln in trial_log_text(admin, trial_id).splitlines() if ln.startswith("run ")]  # type: ignore[arg-type]


def test_a_master_restart_adopts_running_jobs_and_cleans_up_the_rest(
        k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The master SIGKILLed while two trials' Jobs run; meanwhile one of those Jobs is deleted
    and a Job of this cluster that no allocation owns appears. The next master takes the first
    trial's Job back (it trains on in the same pod: one run, its log says so), runs the second
    trial again from its latest checkpoint in a new Job (without using a restart), and deletes
    the stray Job."""
    from kubernetes import client, config

    work = tmp_path_factory.mktemp("k8s-restart")
    with _k8s.namespace(k8s_cluster) as ns, _k8s.k8s_master(
            k8s_cluster, work, ns, slot_resource_requests={"cpu": CPU_PER_SLOT}) as master:
        admin = master.admin()
        cluster_id = admin.get("/api/v1/master")["clusterId"]
        kept, lost = (submit_counter(admin, length=300, sleep=0.1, ckpt_every=10) for _ in range(2))
        wait_for(lambda: all((ts := trials(admin, e)) and ts[0].get("totalBatchesProcessed", 0) >= 12
                             for e in (kept, lost)),
                 timeout=180, what="both trials past their first checkpoints")
        (kept_trial,), (lost_trial,) = trials(admin, kept), trials(admin, lost)
        jobs = _jobs_by_task(k8s_cluster, ns)
        kept_job, lost_job = jobs[kept_trial["taskId"]], jobs[lost_trial["taskId"]]
        master.kill9()
        batch = client.BatchV1Api(config.new_client_from_config(config_file=str(k8s_cluster.kubeconfig)))
        batch.delete_namespaced_job(lost_job, ns, propagation_policy="Background")
        orphan = _orphan_job(k8s_cluster, ns, cluster_id)
        master.start()
        admin = master.admin()
        wait_for(lambda: orphan not in k8s_cluster_jobs(k8s_cluster, ns), timeout=60, what="the stray Job deleted")
        assert kept_job in k8s_cluster_jobs(k8s_cluster, ns)  # adopted, not deleted (it still trains)
        for exp in (kept, lost):
            assert wait_experiment(admin, exp, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                                   timeout=300) == "STATE_COMPLETED", trial_log_text(admin, trials(admin, exp)[0]["id"])[-3000:]
        (kept_trial,), (lost_trial,) = trials(admin, kept), trials(admin, lost)
        text = trial_log_text(admin, kept_trial["id"])
        assert kept_trial["restarts"] == 0 and _runs(admin, kept_trial["id"]) == ["run 1 starting at step 0"], text[-3000:]
        assert "the master took it back" in text and kept_trial["totalBatchesProcessed"] == 300, text[-3000:]
        # Its pod's log was read again from the start by the new master: every line stored once.
        assert text.splitlines().count("done") == 1, text[-3000:]
        runs = _runs(admin, lost_trial["id"])
        assert lost_trial["restarts"] == 0 and len(runs) >= 2, runs
        assert runs[0] == "run 1 starting at step 0" and not runs[-1].endswith(" step 0"), runs
        wait_for(lambda: not k8s_cluster_jobs(k8s_cluster, ns), timeout=60, what="the ended trials' Jobs deleted")


def test_an_evicted_pod_restarts_its_trial_from_its_latest_checkpoint(
        k8s_master: MasterProcess, k8s_cluster: Cluster, namespace: str) -> None:
    """The trial's pod evicted through the Eviction API (what ``kubectl drain`` does): the
    task gets SIGTERM and its pod goes; the master says so in the trial's log and runs the
    trial again from its latest checkpoint in a new Job, without using up a restart."""
    admin = k8s_master.admin()
    exp = submit_counter(admin, length=300, sleep=0.1, ckpt_every=10)
    wait_for(lambda: (ts := trials(admin, exp)) and ts[0].get("totalBatchesProcessed", 0) >= 12,
             timeout=180, what="the trial past its first checkpoint")
    (trial,) = trials(admin, exp)
    core = k8s_cluster.core_v1()
    (pod,) = [p.metadata.name for p in core.list_namespaced_pod(namespace).items
              if (p.metadata.annotations or {}).get(pods.ANNOTATION_TASK) == trial["taskId"]
              and p.status.phase == "Running"]
    core.create_namespaced_pod_eviction(pod, namespace, {  # policy/v1beta1: the test bed is 1.20
        "apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
    state = wait_experiment(admin, exp, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=300)
    (trial,) = trials(admin, exp)
    text = trial_log_text(admin, trial["id"])
    assert state == "STATE_COMPLETED", text[-3000:]
    assert "deleted or evicted by Kubernetes" in text, text[-3000:]
    runs = _runs(admin, trial["id"])
    assert trial["restarts"] == 0 and len(runs) == 2, (trial["restarts"], runs)
    assert runs[0] == "run 1 starting at step 0" and not runs[1].endswith(" step 0"), runs
    assert trial["totalBatchesProcessed"] == 300


def test_registry_auth_is_the_pods_pull_secret(k8s_master: MasterProcess, k8s_cluster: Cluster,
                                               namespace: str) -> None:
    """``environment.registry_auth`` reaches the kubelet as the pod's image pull Secret (which
    the API server accepts as a dockerconfigjson Secret); the pod runs (its image is local)."""
    admin = k8s_master.admin()
    cmd = admin.post("/api/v1/commands", {"config": {
        "entrypoint": ["sleep", "120"], "environment": {"image": IMAGE, "registry_auth": {
            "username": "robot", "password": "s3cret", "serveraddress": "registry.invalid"}}}})["command"]
    core = k8s_cluster.core_v1()
    try:
        def running_pod() -> object | None:
            for pod in core.list_namespaced_pod(namespace).items:
                if (pod.metadata.annotations or {}).get(pods.ANNOTATION_TASK) == cmd["id"] and \
                        pod.status.phase == "Running":
                    return pod
            return None

        pod = wait_for(running_pod, timeout=120, what="the command's pod running")
        (pull,) = [s.name for s in pod.spec.image_pull_secrets]  # type: ignore[attr-defined]
        secret = core.read_namespaced_secret(pull, namespace)
        assert secret.type == "kubernetes.io/dockerconfigjson"
        assert "registry.invalid" in base64.b64decode(secret.data[".dockerconfigjson"]).decode()
    finally:
        admin.post(f"/api/v1/commands/{cmd['id']}/kill", {})
