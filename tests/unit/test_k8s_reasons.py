"""Wait reasons in Kubernetes' terms (issue 31): each node's room when a request does not fit
(``rm._k8s_reasons``, pure, and ``KubernetesRM.explain_wait`` on a node sync), and a created
Job whose pod Kubernetes refuses (a quota), as the job queue's reason and once in the task log
(``KubernetesRM.check_podless``). No cluster: named doubles stand for the API and the services."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from det_agent.wire import Container, TaskSpec
from det_jupyter import scheduler
from det_jupyter.config._kubernetes import KubernetesConfig
from det_jupyter.config.resources import parse_resources
from det_jupyter.rm import _k8s_reasons as reasons
from det_jupyter.rm._kube_api import KubeError, Node
from det_jupyter.rm.agents import AgentRM
from det_jupyter.rm.kubernetes import KubernetesRM
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.jobs import queue

QUOTA = ('pods "det-0123456789abcdef-0-x7k2p" is forbidden: exceeded quota: no-pods, '
         "requested: pods=1, used: pods=0, limited: pods=0")


def _node(name: str, allocatable: dict[str, str], *, ready: bool = True, cordoned: bool = False,
          pool: str = "") -> Node:
    labels = {"det-jupyter.ai/resource-pool": pool} if pool else {}
    return Node(name, ready, "10.0.0.1", allocatable, labels, "v1.20.2", cordoned)


# -- the pure sentences ---------------------------------------------------------------------


@pytest.mark.parametrize(("rooms", "resource", "slots", "per_slot", "expected"), [
    ([reasons.NodeRoom("node-b", True, False, 2, 2, 0, 100), reasons.NodeRoom("node-a", True, False, 0, 0, 0, 100)],
     "nvidia.com/gpu", 1, 1.0,
     "Kubernetes: insufficient nvidia.com/gpu on every node: node-a 0 allocatable, "
     "node-b 2 allocatable of which 2 requested by other pods"),
    ([reasons.NodeRoom("n", True, False, 2, 0.35, 1.5, 100)], "cpu", 64, 0.25,
     "Kubernetes: insufficient cpu on every node: n 2 allocatable of which 0.35 requested by other pods "
     "and 1.5 by this master's tasks; a slot is 0.25 CPU, so 64 slots need 16 CPUs"),
    ([reasons.NodeRoom("n", True, True, 4, 0, 0, 0), reasons.NodeRoom("m", False, False, 8, 0, 0, 9)], "cpu", 1, 1.0,
     "Kubernetes: insufficient cpu on every node: m not Ready, n 4 allocatable, and its kubelet admits "
     "no more pods (cordoned); a slot is 1 CPU, so 1 slot needs 1 CPU"),
    ([], "amd.com/gpu", 2, 1.0, "Kubernetes: insufficient amd.com/gpu on every node: the pool has none"),
])
def test_insufficient_names_each_nodes_room(rooms: list[reasons.NodeRoom], resource: str, slots: int,
                                            per_slot: float, expected: str) -> None:
    assert reasons.insufficient(rooms, resource=resource, slots=slots, per_slot=per_slot) == expected


def test_a_nodes_room_is_its_allocatable_less_other_pods() -> None:
    node = _node("a", {"cpu": "2", "nvidia.com/gpu": "4", "pods": "10"})
    room = reasons.node_room(node, {"cpu": 0.5, "nvidia.com/gpu": 1.0, "pods": 3.0}, resource="nvidia.com/gpu",
                             ours=2.0)
    assert room == reasons.NodeRoom("a", True, False, 4.0, 1.0, 2.0, 7)
    assert reasons.slots_free(room, 1.0) == 1
    cpu = reasons.node_room(node, None, resource="cpu", ours=0.0)
    assert (cpu.allocatable, cpu.others, cpu.pods_left) == (2.0, 0.0, 10)
    assert reasons.slots_free(cpu, 0.25) == 8
    assert reasons.slots_free(reasons.NodeRoom("a", True, False, 2, 0, 0, 3), 0.25) == 3  # the kubelet's pods
    assert reasons.slots_free(reasons.NodeRoom("a", False, False, 2, 0, 0, 3), 0.25) == 0
    assert reasons.slots_free(reasons.NodeRoom("a", True, True, 2, 0, 0, 3), 0.25) == 0


def test_a_pool_without_a_ready_node_says_which_and_why() -> None:
    label = "det-jupyter.ai/resource-pool"
    assert reasons.no_node([], pool="gpu", label=label) == (
        "Kubernetes: no node is in pool gpu (a node's label det-jupyter.ai/resource-pool names its pool)")
    rooms = [reasons.NodeRoom("b", True, True, 4, 0, 0, 9), reasons.NodeRoom("a", False, False, 4, 0, 0, 9)]
    assert reasons.no_node(rooms, pool="gpu", label=label) == "Kubernetes: no node of pool gpu is Ready: a not Ready, b cordoned"


def test_a_refused_pod_names_the_job_the_cause_and_the_fix() -> None:
    assert reasons.refusal("det-x-0", "team-a", "FailedCreate", QUOTA + "\n") == (
        f"Kubernetes does not create the pod of Job det-x-0 in namespace team-a (FailedCreate): {QUOTA}; "
        "the task waits until the namespace's ResourceQuota allows it (kubectl -n team-a describe resourcequota)")
    assert reasons.refusal("j", "ns", "FailedCreate", "admission webhook denied").endswith(
        "(FailedCreate): admission webhook denied; the task waits until Kubernetes creates it")


# -- the manager: explain_wait on its node sync --------------------------------------------


class NothingRuns:
    """The allocation service as the manager sees it when nothing is placed; it knows one task."""

    def live_on(self, agent_id: str) -> dict[str, list[int]]:
        return {}

    def any_pending(self) -> bool:
        return False

    def find_task(self, allocation_id: str) -> tuple[str, int | None] | None:
        return ("task-1", None)

    def exited_soon(self, *args: Any) -> None:
        raise AssertionError(f"the task was ended: {args}")


class RecordingLogs:
    """The task log service: keeps the master's notes."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def append_system(self, *, task_id: str, allocation_id: str | None, trial_id: int | None,
                      message: str, level: str = "INFO") -> None:
        self.notes.append((level, message))


class QuotaApi:
    """The Kubernetes API of a namespace whose quota forbids pods: Jobs are created, and the
    Job controller's events say it cannot make their pods (``refusing`` turns that off)."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.asked: list[tuple[str, str, str]] = []
        self.refusing = True

    def create(self, namespace: str, secret: dict[str, Any], job: dict[str, Any]) -> None:
        self.created.append(job["metadata"]["name"])

    def warnings(self, namespace: str, kind: str, name: str) -> list[tuple[str, str]]:
        self.asked.append((namespace, kind, name))
        return [("FailedCreate", "an older refusal"), ("FailedCreate", QUOTA)] if self.refusing else []

    def log_lines(self, *args: Any) -> Any:
        raise KubeError(400, "the container is waiting to start")

    def delete_job(self, namespace: str, name: str) -> None:
        pass


def _rm(api: Any = None, logs: Any = None, clock: FakeClock | None = None, **k8s: Any) -> KubernetesRM:
    return KubernetesRM(NothingRuns(), logs, clock or FakeClock(), k8s=KubernetesConfig(**k8s), api=api,  # type: ignore[arg-type]
                        cluster_id=lambda: "c1",
                        resources=parse_resources(None, [{"pool_name": "default"}, {"pool_name": "gpu"}]))


def _request(slots: int, pool: str = "") -> scheduler.Request:
    return scheduler.Request("a1", slots, 42, 0.0, resource_pool=pool)


def test_gpu_requests_too_large_for_every_node_name_each_nodes_gpus() -> None:
    rm = _rm(slot_type="cuda")
    rm.sync_nodes([_node("node-a", {"cpu": "8"}), _node("node-b", {"cpu": "8", "nvidia.com/gpu": "2"}),
                   _node("node-c", {"nvidia.com/gpu": "8"}, pool="gpu")],
                  {"node-b": {"nvidia.com/gpu": 2.0, "pods": 1.0}})
    assert rm.explain_wait(_request(1), "R") == (
        "R (Kubernetes: insufficient nvidia.com/gpu on every node: node-a 0 allocatable, "
        "node-b 2 allocatable of which 2 requested by other pods)")
    # The gpu pool's node has room: the scheduler's own reason (the queue ahead) stands alone.
    assert rm.explain_wait(_request(8, "gpu"), "behind job j (priority 1)") == "behind job j (priority 1)"
    assert "node-c 8 allocatable" in rm.explain_wait(_request(9, "gpu"), "R")


def test_cpu_requests_name_cpus_and_the_slot_size_and_what_this_master_holds() -> None:
    rm = _rm(slot_type="cpu", cpu_per_slot=0.25)
    rm.sync_nodes([_node("n", {"cpu": "2", "pods": "110"})], {"n": {"cpu": 0.5, "pods": 4.0}})
    assert rm.explain_wait(_request(6), "R") == "R"  # 1.5 CPUs left: 6 slots fit
    rm.agents["n"].used["other"] = [0, 1, 2, 3]
    assert rm.explain_wait(_request(6), "R") == (
        "R (Kubernetes: insufficient cpu on every node: n 2 allocatable of which 0.5 requested by other pods "
        "and 1 by this master's tasks; a slot is 0.25 CPU, so 6 slots need 1.5 CPUs)")
    assert rm.explain_wait(_request(2), "R") == "R"


def test_a_pool_with_no_ready_node_says_so() -> None:
    rm = _rm(slot_type="cpu")
    rm.sync_nodes([_node("n", {"cpu": "2"}, ready=False), _node("g", {"cpu": "2"}, pool="gpu", cordoned=True)])
    assert rm.explain_wait(_request(1), "waiting for an agent to join pool default") == (
        "waiting for an agent to join pool default (Kubernetes: no node of pool default is Ready: n not Ready)")
    assert rm.explain_wait(_request(0, "gpu"), "R") == "R (Kubernetes: no node of pool gpu is Ready: g cordoned)"
    assert rm.explain_wait(_request(1), "R") == rm.explain_wait(_request(1), "R")  # reads, writes nothing


def test_agents_add_nothing() -> None:
    rm = AgentRM(NothingRuns(), RecordingLogs(), FakeClock())  # type: ignore[arg-type]
    assert rm.explain_wait(_request(99), "R") == "R"
    assert rm.placement_problem("a1") is None


# -- the manager: a Job whose pod Kubernetes refuses ---------------------------------------


def _spec(alloc: str = "0123456789abcdef0123") -> TaskSpec:
    return TaskSpec(task_id="task-1", allocation_id=alloc, task_type="COMMAND", entrypoint=("true",), env={},
                    slot_ids=(0,), info_files={}, container=Container(image="local/hostusr:1"))


def test_a_refused_pod_is_the_reason_and_noted_once_and_the_task_waits() -> None:
    api, logs, clock = QuotaApi(), RecordingLogs(), FakeClock()
    rm = _rm(api, logs, clock, slot_type="cpu", cpu_per_slot=0.5)
    rm.sync_nodes([_node("n", {"cpu": "2"})])

    async def run() -> None:
        rm.start("n", _spec())
        await asyncio.sleep(0.05)  # the Job's creation, in a worker thread
        for _ in range(20):
            if api.created:
                break
            await asyncio.sleep(0.05)
        (job,) = api.created
        await rm.check_podless()  # first seen without a pod: not asked yet
        assert api.asked == [] and rm.placement_problem(_spec().allocation_id) is None
        clock.advance(6)
        await rm.check_podless()
        assert api.asked == [("default", "Job", job)]
        why = rm.placement_problem(_spec().allocation_id)
        assert why is not None and why.startswith(f"Kubernetes does not create the pod of Job {job} in namespace "
                                                  "default (FailedCreate): " + QUOTA), why
        assert rm.placement_problem("another") is None
        clock.advance(6)
        await rm.check_podless()
        assert logs.notes == [("WARNING", why)]  # once, and the task was not ended (NothingRuns)
        # The quota was raised: the Job's pod comes, and nothing holds the job up any more.
        pod = SimpleNamespace(metadata=SimpleNamespace(name=f"{job}-x7k2p", labels={"job-name": job},
                                                       deletion_timestamp=None),
                              status=SimpleNamespace(container_statuses=None, reason=None, phase="Pending"))
        rm.pod_event("ADDED", pod)
        assert rm.placement_problem(_spec().allocation_id) is None
        clock.advance(6)
        await rm.check_podless()
        assert len(api.asked) == 2 and rm._why.problems == {}
        rm.end()

    asyncio.run(run())


class HeldUp:
    """A resource manager whose cluster holds one placed allocation up."""

    def explain_wait(self, request: scheduler.Request, reason: str) -> str:
        return f"{reason} [{request.allocation_id}]"

    def placement_problem(self, allocation_id: str) -> str | None:
        return "quota" if allocation_id == "a2" else None


def test_the_queue_shows_the_managers_words_for_queued_and_held_up_jobs() -> None:
    agents = (scheduler.AgentSlots("n", "", (), 1),)
    running = (scheduler.Running("a1", "j1", (scheduler.Placement("n", (0,)),), 42),
               scheduler.Running("a2", "j2", (), 42))
    snap = scheduler.Snapshot((scheduler.Request("a3", 64, 42, 0.0, job_id="j3"),), agents, running)
    jobs = [queue.Job(j, 0, j, "u", 1, 1, 0.0, "default", 42, 1.0, 1, 1, 0.0, state, 0, None)
            for j, state in (("j1", queue.SCHEDULED), ("j2", queue.SCHEDULED), ("j3", queue.QUEUED))]
    out = queue._in_queue_order([((i,), j) for i, j in enumerate(jobs)], snap, "priority", HeldUp())
    assert [j.wait_reason for j in out] == [
        None, "quota", "needs 64 slots but the largest pool (default) has 1 [a3]"]


@pytest.mark.parametrize(("rooms", "slots", "expected"), [
    ([reasons.NodeRoom("n", True, False, 2, 1, 0, 9)], 4, "R"),  # 1 CPU left: four 0.25 slots fit
    ([reasons.NodeRoom("n", True, False, 2, 1, 0.5, 9)], 4, "R (Kubernetes: insufficient cpu on every node: n 2 "
     "allocatable of which 1 requested by other pods and 0.5 by this master's tasks; a slot is 0.25 CPU, so 4 "
     "slots need 1 CPU)"),
    ([reasons.NodeRoom("n", False, False, 2, 0, 0, 9)], 0, "R (Kubernetes: no node of pool p is Ready: n not Ready)"),
    ([], 1, "R (Kubernetes: no node is in pool p (a node's label L names its pool))"),
])
def test_explain_adds_the_cause_only_when_kubernetes_has_one(rooms: list[reasons.NodeRoom], slots: int,
                                                            expected: str) -> None:
    assert reasons.explain("R", rooms, slots=slots, pool="p", resource="cpu", per_slot=0.25, label="L") == expected
