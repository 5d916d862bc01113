"""After a master restart the Kubernetes resource manager takes back the allocations whose Jobs
all still exist, ends the others without blame (or as killed, where a kill was under way), and
says so in their logs (``KubernetesRM.adopt``; the real Jobs: tests/integration/test_k8s_rm.py)."""

from __future__ import annotations

from typing import Any

from det_jupyter.config._kubernetes import KubernetesConfig
from det_jupyter.config.resources import parse_resources
from det_jupyter.rm import _k8s_pods as pods
from det_jupyter.rm.kubernetes import KubernetesRM
from det_jupyter.services.common.clock import FakeClock


class _Allocs:
    def __init__(self) -> None:
        self.adopted_ids: list[str] = []
        self.exits: list[tuple[str, int | None, str | None]] = []

    def adopted(self, allocation_id: str) -> None:
        self.adopted_ids.append(allocation_id)

    def exited(self, allocation_id: str, exit_code: int | None, reason: str | None, agent_id: str | None = None) -> None:
        self.exits.append((allocation_id, exit_code, reason))

    def find_task(self, allocation_id: str) -> tuple[str, int | None]:
        return allocation_id.split(".")[0], 7


class _Logs:
    def __init__(self) -> None:
        self.lines: list[tuple[str | None, str, str]] = []

    def append_system(self, *, task_id: str, allocation_id: str | None, trial_id: int | None, message: str,
                      level: str = "INFO") -> None:
        self.lines.append((allocation_id, level, message))


def _rm() -> tuple[Any, _Allocs, _Logs]:
    allocs, logs = _Allocs(), _Logs()
    rm = KubernetesRM(allocs, logs, FakeClock(), k8s=KubernetesConfig(slot_type="cpu"), api=None,  # type: ignore[arg-type]
                      cluster_id=lambda: "c1", resources=parse_resources(None, [{"pool_name": "default"}]))
    return rm, allocs, logs


def test_a_gang_whose_jobs_all_exist_is_adopted_rank_by_rank() -> None:
    rm, allocs, logs = _rm()
    found = {pods.job_name("t1.a.1", 0): "ns", pods.job_name("t1.a.1", 1): "ns"}
    assert rm.adopt("t1.a.1", "RUNNING", ["node/0", "node/1"], found)
    assert allocs.adopted_ids == ["t1.a.1"] and not allocs.exits
    adopted = {p.name: (p.agent, p.node, p.namespace) for p in rm._pods.values()}
    assert adopted == {pods.job_name("t1.a.1", 0): ("node/0", "node", "ns"),
                       pods.job_name("t1.a.1", 1): ("node/1", "node", "ns")}
    assert rm._ranks["t1.a.1"] == 2  # a later container would not reuse a name
    assert logs.lines == [("t1.a.1", "INFO", "the master restarted; its 2 Jobs kept running and the master took it back")]


def test_a_missing_job_ends_the_allocation_without_blame() -> None:
    rm, allocs, logs = _rm()
    found = {pods.job_name("t2.a.1", 0): "ns"}  # rank 1 is gone
    assert not rm.adopt("t2.a.1", "RUNNING", ["a", "b"], found)
    assert not allocs.adopted_ids and not rm._pods
    assert allocs.exits == [("t2.a.1", None, "its Job was gone when the master restarted")]
    (line,) = logs.lines
    assert line[1] == "WARNING" and pods.job_name("t2.a.1", 1) in line[2] and "latest checkpoint" in line[2]


def test_an_allocation_being_killed_is_not_adopted_and_ends_killed() -> None:
    rm, allocs, _ = _rm()
    found = {pods.job_name("t3.a.1", 0): "ns"}
    assert not rm.adopt("t3.a.1", "TERMINATING", ["a"], found)
    assert allocs.exits == [("t3.a.1", 137, "killed (the master restarted while it stopped)")]
    assert not rm._pods  # its Job is left to the orphan sweep, which deletes it


def test_an_allocation_never_created_ends() -> None:
    rm, allocs, _ = _rm()
    assert not rm.adopt("t4.a.1", "ASSIGNED", ["a"], {})
    assert allocs.exits and allocs.exits[0][1] is None


def test_an_allocation_that_ends_without_its_pod_gets_its_job_deleted() -> None:
    """A node lost for longer than the reconnect wait ends its allocations (AgentRM): their
    Jobs must not run on when it comes back."""
    import asyncio

    deleted: list[tuple[str, str]] = []

    class _Api:
        def delete_job(self, namespace: str, name: str) -> None:
            deleted.append((namespace, name))

    async def scenario() -> None:
        rm, _, _ = _rm()
        rm._api = _Api()
        found = {pods.job_name("t5.a.1", 0): "ns", pods.job_name("t6.a.1", 0): "ns"}
        assert rm.adopt("t5.a.1", "RUNNING", ["a"], found) and rm.adopt("t6.a.1", "RUNNING", ["b"], found)
        rm.released("t5.a.1")
        await asyncio.gather(*rm._tasks)
        assert deleted == [("ns", pods.job_name("t5.a.1", 0))]
        assert [p.allocation_id for p in rm._pods.values()] == ["t6.a.1"]

    asyncio.run(scenario())
