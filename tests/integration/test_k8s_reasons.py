"""Issue 31 (wait reasons in Kubernetes' terms) against the real single-node test bed
(tests/_k8s.py): a command too large for the node waits with a reason that names the node's
CPUs and the slot size; a command whose pod a namespace ResourceQuota forbids is SCHEDULED with
the quota as its wait reason and in its log, keeps waiting, and runs once the quota is gone.

The pods are as in test_k8s_rm.py (``local/hostusr:1``, this checkout lent, ``hostNetwork``).
The quota is the test's own namespace's; nothing cluster-wide is made.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests import _k8s
from tests._k8s import Cluster
from tests._master import Client, MasterProcess, wait_for
from tests.integration._exp import task_log_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CPU_PER_SLOT = 0.25
QUOTA = "no-pods"


@pytest.fixture(scope="module")
def namespace(k8s_cluster: Cluster) -> Iterator[str]:
    with _k8s.namespace(k8s_cluster, "det-reasons") as name:
        yield name


@pytest.fixture(scope="module")
def k8s_master(k8s_cluster: Cluster, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    with _k8s.k8s_master(k8s_cluster, tmp_path_factory.mktemp("k8s-reasons"), namespace,
                         slot_resource_requests={"cpu": CPU_PER_SLOT}) as master:
        yield master


def _job_of(admin: Client, task_id: str) -> dict[str, Any] | None:
    jobs = [j["full"] for j in admin.get("/api/v1/job-queues-v2")["jobs"]]
    return next((j for j in jobs if j["entityId"] == task_id), None)


def _command(admin: Client, entrypoint: list[str], slots: int = 1) -> str:
    return str(admin.post("/api/v1/commands", {"config": {
        "entrypoint": entrypoint, "resources": {"slots": slots}}})["command"]["id"])


def test_a_request_too_large_for_the_node_names_its_cpus_and_the_slot_size(
        k8s_master: MasterProcess, k8s_cluster: Cluster) -> None:
    admin = k8s_master.admin()
    wait_for(lambda: admin.get("/api/v1/agents")["agents"], timeout=30, what="the node as an agent")
    cmd = _command(admin, ["true"], slots=64)
    try:
        def reason() -> str | None:
            job = _job_of(admin, cmd)
            return job.get("waitReason") if job and job["summary"]["state"] == "STATE_QUEUED" else None

        text = wait_for(reason, timeout=30, what="the command queued with a reason")
        node = re.escape(k8s_cluster.node)
        assert re.fullmatch(
            rf"needs 64 slots but the largest pool \(default\) has \d+ \(Kubernetes: insufficient cpu on every "
            rf"node: {node} [\d.]+ allocatable( of which [\d.]+ requested by other pods)?( and [\d.]+ by this "
            rf"master's tasks)?; a slot is 0\.25 CPU, so 64 slots need 16 CPUs\)", text), text
    finally:
        admin.post(f"/api/v1/commands/{cmd}/kill")


def test_a_pod_a_quota_forbids_waits_naming_the_quota_and_runs_once_it_is_gone(
        k8s_master: MasterProcess, k8s_cluster: Cluster, namespace: str) -> None:
    admin = k8s_master.admin()
    core = k8s_cluster.core_v1()
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": "0"}}})
    quota_on = True
    try:
        wait_for(lambda: (core.read_namespaced_resource_quota(QUOTA, namespace).status.hard or {}).get("pods") == "0",
                 timeout=30, what="the quota counted by its controller")
        cmd = _command(admin, ["python3", "-c", "print('ran after the quota')"])

        def held_up() -> dict[str, Any] | None:
            job = _job_of(admin, cmd)
            return job if job and "exceeded quota" in (job.get("waitReason") or "") else None

        job = wait_for(held_up, timeout=120, what="the quota as the job's wait reason")
        assert job["summary"]["state"] == "STATE_SCHEDULED", job
        reason = job["waitReason"]
        assert re.match(rf"Kubernetes does not create the pod of Job det-[0-9a-f]{{16}}-0 in namespace {namespace} "
                        rf"\(FailedCreate\): .*exceeded quota: {QUOTA}", reason), reason
        def noted() -> str | None:
            text = task_log_text(admin, cmd)
            return text if "exceeded quota" in text else None

        log = wait_for(noted, timeout=30, what="the quota in the task log")
        assert log.count("Kubernetes does not create the pod") == 1, log
        assert admin.get(f"/api/v1/commands/{cmd}")["command"]["state"] != "STATE_TERMINATED"

        core.delete_namespaced_resource_quota(QUOTA, namespace)
        quota_on = False
        wait_for(lambda: admin.get(f"/api/v1/commands/{cmd}")["command"]["state"] == "STATE_TERMINATED",
                 timeout=240, what="the command run once the quota is gone")
        assert "ran after the quota" in task_log_text(admin, cmd)
        assert _job_of(admin, cmd) is None
    finally:
        if quota_on:
            core.delete_namespaced_resource_quota(QUOTA, namespace)
