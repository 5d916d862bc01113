"""Issue 31 (first part): the Kubernetes resource manager against a real single-node Kubernetes
(tests/_k8s.py, scripts/k8s/): a master with ``resource_manager: {type: kubernetes}`` and no
agent runs our Core API counter experiment as Jobs, with checkpoints; its node shows as an
agent; an over-large request waits with a reason instead of being created; a kill deletes the
running Job; an image that cannot be pulled fails the trial, saying so.

The pods run the registry-free ``local/hostusr:1`` image with the host's ``/usr`` read-only
(Debian's python3) and this checkout (det_agent's bootstrap, the harness) and the test venv's
site-packages lent read-only at /opt/det, through ``task_container_defaults.cpu_pod_spec``,
as a user's pod spec would add volumes; ``hostNetwork`` lets them reach the master on
127.0.0.1 (the test bed has no CNI).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

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
    agents = wait_for(lambda: admin.get("/api/v1/agents")["agents"], timeout=30, what="the node as an agent")
    (node,) = agents
    assert node["id"] == k8s_cluster.node
    assert len(node["slots"]) == int(2 / CPU_PER_SLOT)


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
        assert job["waitReason"] == f"needs 64 slots but the largest pool (default) has {int(2 / CPU_PER_SLOT)}", job
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


def test_a_master_killed_while_a_job_runs_cleans_it_up_and_the_trial_resumes(
        k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A master SIGKILLed while its trial's Job runs: the next master deletes the Job it no
    longer has an allocation for, and the trial runs again from its latest checkpoint, in a new
    Job, without using a restart."""
    work = tmp_path_factory.mktemp("k8s-restart")
    with _k8s.namespace(k8s_cluster) as ns, _k8s.k8s_master(
            k8s_cluster, work, ns, slot_resource_requests={"cpu": CPU_PER_SLOT}) as master:
        admin = master.admin()
        exp = submit_counter(admin, length=150, sleep=0.1, ckpt_every=5)
        wait_for(lambda: (ts := trials(admin, exp)) and ts[0].get("totalBatchesProcessed", 0) >= 12,
                 timeout=180, what="the trial past its first checkpoints")
        (before,) = k8s_cluster_jobs(k8s_cluster, ns)
        master.kill9()
        master.start()
        admin = master.admin()
        wait_for(lambda: before not in k8s_cluster_jobs(k8s_cluster, ns), timeout=60,
                 what="the old master's Job deleted")
        assert wait_experiment(admin, exp, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                               timeout=300) == "STATE_COMPLETED"
        (trial,) = trials(admin, exp)
        runs = [ln for ln in trial_log_text(admin, trial["id"]).splitlines() if ln.startswith("run ")]
        assert trial["restarts"] == 0 and len(runs) >= 2, runs
        assert runs[0] == "run 1 starting at step 0" and not runs[-1].endswith(" step 0"), runs
