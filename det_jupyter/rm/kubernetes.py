"""The Kubernetes resource manager: a cluster's nodes are the master's agents, and each container
of an allocation is a batch/v1 Job (``_k8s_pods``) pinned to the node the master chose.

Placement is the master's own (``AgentRM``'s passes: the pools' priority, fair-share or
round-robin policies, with preemption): a node offers its allocatable GPUs (``slot_type: cuda``)
or its CPUs in ``slot_resource_requests.cpu`` units (``slot_type: cpu``) as slots, so a gang's
Jobs are created only when all of it fits, and no Kubernetes scheduler (or coscheduling plugin)
decides anything. A node is in the pool its ``det-jupyter.ai/resource-pool`` label names, else the
default compute pool; a pool's tasks run in its ``kubernetes_namespace``.

What runs where: a watch of the cluster's pods (by label) reports a container running (the
task started), waiting on an image it cannot pull (the task fails, saying so), or ended (its exit
code; OOM kills and evictions named; an eviction or a rejection by the node is no fault of the
task, so a trial restarts from its latest checkpoint without using a restart). Each pod's log is
followed from its start and stored as the task's log, numbered by line, so reading it again
stores nothing twice. A kill deletes the Job: its pod gets SIGTERM, then SIGKILL after 10 s.

Jobs outlive the master: after a restart, the Jobs (by label and name) of the allocations it
had placed are adopted and their pods watched and read again, the allocations whose Jobs are
gone end without blame, and Jobs no allocation owns are deleted (``_adopt_then_watch``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from det_agent import wire

from .. import scheduler
from . import _k8s_pods as pods
from . import _k8s_reasons as reasons
from ._kube_api import KubeApi, KubeError, Node, quantity_value
from ._kube_api import call as kube_call
from .agents import AgentHandle, AgentRM
from .base import AllocationPort, Clock, Pools, TaskLogPort

__all__ = ["KubeApi", "KubernetesRM"]

log = logging.getLogger("det_jupyter.rm.kubernetes")

NODE_SYNC_S = 5.0
PODLESS_CHECK_S = 5.0  # how often Jobs still without a pod are checked for Kubernetes' refusal
PODLESS_AFTER_S = 5.0  # how long a Job may be without a pod before that check asks why
PODLESS_ASKS = 20  # the most Jobs one check asks about
LOG_BATCH = 200
LOG_POLL_S = 0.25  # how often a pod's log is tried while its container waits to start
PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
BROKEN = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
POOL_LABEL = "det-jupyter.ai/resource-pool"
BOOTSTRAP = ("python3", "-m", "det_agent.pod")


class KubeSettings(Protocol):
    """``config.resources.KubernetesConfig`` as the manager reads it."""

    @property
    def slot_type(self) -> str: ...
    @property
    def cpu_per_slot(self) -> float: ...
    @property
    def max_slots_per_pod(self) -> int | None: ...
    @property
    def default_scheduler(self) -> str: ...
    def namespace_of(self, pool: str) -> str: ...
    def pod_spec_for(self, pool: str, gpu: bool) -> Mapping[str, Any] | None: ...


@dataclass
class _Pod:
    """One container of an allocation, as a Job."""

    allocation_id: str
    agent: str  # the scheduler's agent (the node, or a pod-sized share of it)
    node: str
    namespace: str
    name: str  # the Job's (and Secret's)
    pod: str | None = None
    started: bool = False
    ended: bool = False
    killed: bool = False
    told: frozenset[str] = frozenset()  # waiting reasons already put in the task log
    follower: threading.Thread | None = None


class KubernetesRM(AgentRM):
    """``AgentRM`` whose agents are a Kubernetes cluster's nodes (module doc)."""

    adopts_running = True  # Jobs outlive the master: begin() adopts them

    def __init__(self, allocations: AllocationPort, logs: TaskLogPort, clock: Clock, *,
                 k8s: KubeSettings, api: KubeApi, cluster_id: Callable[[], str],
                 resources: Pools | None = None, preemption_timeout_s: float = 3600.0,
                 reconnect_wait_s: float = 25.0, bootstrap: Sequence[str] = BOOTSTRAP) -> None:
        super().__init__(allocations, logs, clock, resources=resources,
                         reconnect_wait_s=reconnect_wait_s, preemption_timeout_s=preemption_timeout_s)
        self._k8s = k8s
        self._api = api
        self._cluster_id = cluster_id
        self._bootstrap = tuple(bootstrap)
        self._pods: dict[str, _Pod] = {}  # by Job name
        self._node_of: dict[str, str] = {}  # agent id -> its node (one node may be several agents)
        self._cordoned: set[str] = set()  # agents disabled because their node is cordoned
        self._ranks: dict[str, int] = {}  # allocation id -> containers launched so far
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._why = reasons.WaitNotes()  # what explains waits in Kubernetes' terms

    # -- life -----------------------------------------------------------------------------

    def begin(self) -> None:
        """Start watching nodes, adopt what an earlier master left running, then watch pods
        (from the event loop, once the master started)."""
        self._loop = asyncio.get_running_loop()
        self._spawn(self._sync_nodes_forever())
        self._spawn(self._check_podless_forever())
        self._spawn(self._adopt_then_watch())

    def end(self) -> None:
        self._stop.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- nodes as agents --------------------------------------------------------------------

    async def _sync_nodes_forever(self) -> None:
        while not self._stop.is_set():
            try:
                nodes = await asyncio.to_thread(self._api.nodes)
                others = await asyncio.to_thread(self._api.others_requests, pods.LABEL_CLUSTER, self._cluster_id())
                self.sync_nodes(nodes, others)
            except KubeError as exc:
                log.warning("cannot list the Kubernetes nodes: %s", exc)
            await asyncio.sleep(NODE_SYNC_S)

    def slots_of(self, node: Node, taken: Mapping[str, float] | None = None) -> tuple[wire.Slot, ...]:
        """A node's slots: its allocatable GPUs, or its CPUs in slot-sized units, less what
        pods not of this master request there (``taken``), which no task of ours can use."""
        kind = self._k8s.slot_type
        taken = taken or {}
        if kind in pods.GPU_RESOURCE:
            res = pods.GPU_RESOURCE[kind]
            count = int(quantity_value(node.allocatable.get(res, "0")) - taken.get(res, 0.0))
        else:
            free = quantity_value(node.allocatable.get("cpu", "0")) - taken.get("cpu", 0.0)
            count = math.floor(free / self._k8s.cpu_per_slot + 1e-9)
        # Every slot may be a pod of its own: no more than the kubelet admits (its ``pods``).
        room = int(quantity_value(node.allocatable.get("pods", "110")) - taken.get("pods", 0.0))
        count = min(count, room)
        return tuple(wire.Slot(i, kind, f"{node.name} {kind} {i}") for i in range(max(count, 0)))

    def pod_agents(self, node: Node, taken: Mapping[str, float] | None = None) -> list[tuple[str, tuple[wire.Slot, ...]]]:
        """The agents a node is to the scheduler, and their slots: the node itself, or, where
        ``max_slots_per_pod`` is below its slots, one per pod-sized share of them
        (``<node>/<i>``), so that a gang is split into pods of at most that many slots, as many
        on one node as fit."""
        slots = self.slots_of(node, taken)
        per_pod = self._k8s.max_slots_per_pod
        if not per_pod or len(slots) <= per_pod:
            return [(node.name, slots)]
        shares = []
        for i, first in enumerate(range(0, len(slots), per_pod)):
            part = slots[first:first + per_pod]
            shares.append((f"{node.name}/{i}", tuple(dataclasses.replace(s, id=j) for j, s in enumerate(part))))
        return shares

    def sync_nodes(self, nodes: Sequence[Node], others: Mapping[str, Mapping[str, float]] | None = None) -> None:
        """Nodes join (Ready), change slots, leave (NotReady, cordoned or gone: their tasks are
        lost after ``reconnect_wait_s``, as an agent's)."""
        self._why.nodes, self._why.others = tuple(nodes), dict(others or {})
        seen = set()
        for node in nodes:
            pool = node.labels.get(POOL_LABEL) or self.resources.default_compute_pool
            if pool not in self.resources.pools:
                pool = self.resources.default_compute_pool
            for agent_id, slots in self.pod_agents(node, (others or {}).get(node.name)) if node.ready else []:
                seen.add(agent_id)
                self._node_of[agent_id] = node.name
                self._agent(agent_id, node, pool, slots)
        ready = {n.name for n in nodes if n.ready}
        for name, handle in list(self.agents.items()):
            if name in seen or not handle.connected:
                continue
            if self._node_of.get(name, name) in ready and handle.used:
                continue  # a share of a node others now crowd: its tasks keep running there
            log.warning("node %s is gone, not Ready or smaller", self._node_of.get(name, name))
            self.disconnected(name)

    def _agent(self, agent_id: str, node: Node, pool: str, slots: tuple[wire.Slot, ...]) -> None:
        known = self.agents.get(agent_id)
        if node.unschedulable and agent_id not in self.disabled:  # cordoned: drain it
            self.disabled[agent_id] = True
            self._cordoned.add(agent_id)
        elif not node.unschedulable and agent_id in self._cordoned:  # uncordoned
            self._cordoned.discard(agent_id)
            self.disabled.pop(agent_id, None)
            self.schedule_soon()
        if known is not None and known.connected and known.slots == slots and known.resource_pool == pool:
            return
        timer = self._lost_timers.pop(agent_id, None)
        if timer is not None:
            timer.cancel()
        handle = AgentHandle(agent_id, pool, slots, self._sender(agent_id), address=node.address,
                             registered_at=known.registered_at if known else self._clock.now(),
                             version=node.version, features=frozenset({"docker", "kubernetes"}))
        handle.used = dict(known.used) if known else self._allocs.live_on(agent_id)
        self.agents[agent_id] = handle
        log.info("node %s: agent %s in pool %s with %d %s slots", node.name, agent_id, pool, len(slots),
                 self._k8s.slot_type)
        self.schedule_soon()

    def snapshot(self) -> scheduler.Snapshot:
        """As agents', less the Docker requirement of image tasks: every node runs images."""
        snap = super().snapshot()
        pending = tuple(dataclasses.replace(r, requires=frozenset()) if r.requires else r for r in snap.pending)
        return scheduler.Snapshot(pending, snap.agents, snap.running)

    def _sender(self, agent_id: str) -> Callable[[wire.MasterFrame], None]:
        def send(frame: wire.MasterFrame) -> None:
            if isinstance(frame, wire.KillTask):
                self._kill(agent_id, frame.allocation_id)
        return send

    # -- launching ------------------------------------------------------------------------

    def start(self, agent_id: str, spec: wire.TaskSpec) -> None:
        alloc = spec.allocation_id
        rank = self._ranks.get(alloc, 0)
        self._ranks[alloc] = rank + 1
        handle = self.agents[agent_id]
        node = self._node_of.get(agent_id, agent_id)
        slot_type = handle.slot_type(spec.slot_ids) if spec.slot_ids else "cpu"
        namespace = self._k8s.namespace_of(handle.resource_pool)
        try:
            secret, job = pods.build_objects(
                spec, rank=rank, node=node, namespace=namespace, cluster_id=self._cluster_id(),
                slot_type=slot_type, cpu_per_slot=self._k8s.cpu_per_slot,
                default_pod=self._k8s.pod_spec_for(handle.resource_pool, slot_type in pods.GPU_RESOURCE),
                bootstrap=self._bootstrap, default_scheduler=self._k8s.default_scheduler)
        except ValueError as exc:
            self._note(alloc, str(exc), "ERROR")
            self._allocs.exited_soon(alloc, 1, str(exc), agent_id)
            return
        p = _Pod(alloc, agent_id, node, namespace, job["metadata"]["name"])
        self._pods[p.name] = p
        self._spawn(self._create(p, secret, job))

    async def _create(self, p: _Pod, secret: dict[str, Any], job: dict[str, Any]) -> None:
        try:
            await kube_call(self._api.create, p.namespace, secret, job)  # the manager's own pool
        except KubeError as exc:
            message = f"Kubernetes refused the task's Job {p.name} in namespace {p.namespace}: {exc}"
            self._note(p.allocation_id, message, "ERROR")
            await self._finish(p, 1, message)
            return
        log.info("job %s/%s created for %s on %s", p.namespace, p.name, p.allocation_id, p.node)
        if p.killed:  # killed while it was being created
            await asyncio.to_thread(self._delete, p.namespace, p.name)

    def _kill(self, agent_id: str, allocation_id: str) -> None:
        for p in list(self._pods.values()):
            if p.allocation_id == allocation_id and p.agent == agent_id and not p.ended:
                p.killed = True
                self._spawn(self._kill_pod(p))

    async def _kill_pod(self, p: _Pod) -> None:
        await asyncio.to_thread(self._delete, p.namespace, p.name)
        if not p.started:  # nothing ran: no container end will come
            await self._finish(p, 137, "killed")

    def released(self, allocation_id: str, agent_id: str | None = None) -> None:
        """As agents'; and a Job still up of an allocation that ended without its pod's end
        (its node was lost, or left) is deleted: nothing of it may run on when the node comes
        back."""
        super().released(allocation_id, agent_id)
        if agent_id is None:
            self._ranks.pop(allocation_id, None)
        for p in list(self._pods.values()):
            if p.allocation_id == allocation_id and (agent_id is None or p.agent == agent_id) and not p.ended:
                log.info("deleting job %s/%s: its allocation ended without it", p.namespace, p.name)
                p.ended = p.killed = True
                self._pods.pop(p.name, None)
                self._spawn(asyncio.to_thread(self._delete, p.namespace, p.name))

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self._api.delete_job(namespace, name)
        except KubeError as exc:
            log.warning("deleting job %s/%s failed: %s", namespace, name, exc)

    # -- what the pods do -----------------------------------------------------------------

    def _from_thread(self, kind: str, pod: Any) -> None:
        if self._loop is not None and not self._stop.is_set():
            self._loop.call_soon_threadsafe(self.pod_event, kind, pod)

    def pod_event(self, kind: str, pod: Any) -> None:
        """A watch event of one of the cluster's pods."""
        name = (pod.metadata.labels or {}).get("job-name", "")
        p = self._pods.get(name)
        if p is None or p.ended:
            return
        p.pod = pod.metadata.name
        status = pod.status
        cs = next((c for c in status.container_statuses or () if c.name == pods.CONTAINER), None)
        state = cs.state if cs is not None else None
        waiting = state.waiting if state is not None else None
        if waiting is not None and waiting.reason:
            self._waiting(p, waiting.reason, waiting.message or "")
        if state is not None and (state.running or state.terminated):
            # Its container started: read its log (from the start). Not before: trying the log
            # of a container still being created costs the API server and the kubelet more
            # than the watch does (BM-11: 0.72 of the direct rate with tries, 0.92 without).
            if p.follower is None:
                p.follower = threading.Thread(target=self._follow, args=(p,), name=f"k8s-log-{p.name}", daemon=True)
                p.follower.start()
            self._mark_started(p)
        terminated = state.terminated if state is not None else None
        # Deleted by someone else than this master (an Eviction: `kubectl drain`, a user's
        # `kubectl delete`): the task's SIGTERM exit is no fault of the task; as an agent lost.
        deleted = pod.metadata.deletion_timestamp is not None and not p.killed
        if status.reason == "Evicted":
            self._lost(p, f"its pod was evicted from node {p.node}: {status.message or ''}".strip())
        elif deleted and terminated is not None:
            self._lost(p, f"its pod was deleted or evicted by Kubernetes (not by the master; exit "
                          f"code {terminated.exit_code})")
        elif terminated is not None:
            reason = terminated.reason
            if reason == "OOMKilled":
                reason = "OOM killed: the container went over its memory limit"
            elif reason in ("Completed", "Error", None):
                reason = "killed" if p.killed else None
            self._end(p, int(terminated.exit_code), reason)
        elif status.phase == "Failed":  # the node refused the pod before it ran (OutOfcpu, …)
            self._lost(p, f"node {p.node} refused the pod: {status.reason}: {status.message or ''}")
        elif kind == "DELETED":
            if p.killed:
                self._end(p, 137, "killed")
            else:
                self._lost(p, "its pod was deleted")

    def _lost(self, p: _Pod, why: str) -> None:
        """The pod went through no fault of its task: said in the task's log, and the run ends
        with no exit code (a trial resumes from its latest checkpoint without using a restart).
        Only from ``pod_event``, which has already dropped the events of an ended pod."""
        self._note(p.allocation_id, f"{why}; no fault of the task (a trial resumes from its latest "
                                    "checkpoint)", "WARNING")
        self._end(p, None, why)

    def _waiting(self, p: _Pod, reason: str, message: str) -> None:
        if reason in p.told or reason in ("ContainerCreating", "PodInitializing"):
            return
        p.told = p.told | {reason}
        if reason in PULL_FAILURES or reason in BROKEN:
            what = "the image could not be pulled" if reason in PULL_FAILURES else "the container could not start"
            text = f"{what} ({reason}): {message}".strip()
            self._note(p.allocation_id, text, "ERROR")
            p.killed = True
            self._spawn(asyncio.to_thread(self._delete, p.namespace, p.name))
            self._end(p, 1, text)

    def _end(self, p: _Pod, exit_code: int | None, reason: str | None) -> None:
        if not p.ended:
            p.ended = True
            self._spawn(self._finish(p, exit_code, reason))

    async def _finish(self, p: _Pod, exit_code: int | None, reason: str | None) -> None:
        p.ended = True
        if p.follower is not None:  # every line in before the exit
            await asyncio.to_thread(p.follower.join, 15.0)
        self._pods.pop(p.name, None)
        if not any(q.allocation_id == p.allocation_id for q in self._pods.values()):
            self._ranks.pop(p.allocation_id, None)
        self._allocs.exited_soon(p.allocation_id, exit_code, reason, p.agent)
        if not p.killed:
            await asyncio.to_thread(self._delete, p.namespace, p.name)

    def _mark_started(self, p: _Pod) -> None:
        if not p.started and not p.ended:
            p.started = True
            self._allocs.started(p.allocation_id)

    def _follow(self, p: _Pod) -> None:
        """(a thread) The pod's log, from its start, as task log lines numbered by line; it
        waits (polling) while the container waits to start, and says when it has."""
        seq = 0
        batch: list[wire.LogLine] = []
        assert p.pod is not None
        opened = False

        def on_open() -> None:
            nonlocal opened
            opened = True
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._mark_started, p)

        try:
            while not opened and not self._stop.is_set():
                try:
                    for raw in self._api.log_lines(p.namespace, p.pod, pods.CONTAINER, on_open):
                        if raw is None:  # the end of what one read brought: deliver it now
                            if batch:
                                self._lines(p, batch)
                                batch = []
                            continue
                        seq += 1
                        stamp, _, text = raw.partition(" ")
                        rank, text = wire.split_rank(text)
                        batch.append(wire.LogLine(seq, "stdout", text + "\n", _iso(stamp), rank))
                        if len(batch) >= LOG_BATCH:
                            self._lines(p, batch)
                            batch = []
                except KubeError as exc:
                    if opened or exc.status != 400 or p.ended:  # 400: not started yet
                        if exc.status != 400:
                            log.warning("reading the log of pod %s/%s failed: %s", p.namespace, p.pod, exc)
                        return
                    self._stop.wait(LOG_POLL_S)
        finally:
            if batch:
                self._lines(p, batch)

    def _lines(self, p: _Pod, lines: list[wire.LogLine]) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.handle, p.agent, wire.Logs(p.allocation_id, tuple(lines)))

    def _note(self, allocation_id: str, message: str, level: str = "INFO") -> None:
        found = self._allocs.find_task(allocation_id)
        if found is not None:
            self._logs.append_system(task_id=found[0], allocation_id=allocation_id, trial_id=found[1],
                                     message=message, level=level)

    # -- after a master restart -----------------------------------------------------------

    async def _adopt_then_watch(self) -> None:
        """The Jobs this cluster's earlier master left: those of live allocations are adopted
        (their pods' logs are read again from the start; lines already stored are dropped by
        number), a live allocation whose Jobs are not all there (or that was being killed) ends
        without blame (a trial resumes from its latest checkpoint), and a Job no allocation
        owns is deleted. Then the pods are watched: the watch's first list reports where the
        adopted ones are (running, or ended while no master looked)."""
        selector = f"{pods.LABEL_CLUSTER}={self._cluster_id()}"
        namespaces = sorted({self._k8s.namespace_of(p) for p in self.resources.pools})
        found: dict[str, str] = {}  # Job name -> its namespace
        stray: dict[str, str] = {}  # Secrets too (a Job's is deleted with it)
        for ns in namespaces:
            while not self._stop.is_set():
                try:
                    jobs, secrets = await asyncio.to_thread(self._api.jobs, ns, selector)
                    found.update(dict.fromkeys(jobs, ns))
                    stray.update(dict.fromkeys(jobs | secrets, ns))
                    break
                except KubeError as exc:
                    log.warning("cannot list the Jobs in %s (%s); trying again in %g s", ns, exc, NODE_SYNC_S)
                    await asyncio.sleep(NODE_SYNC_S)
        for alloc_id, (state, agents) in self._allocs.placed().items():
            self.adopt(alloc_id, state, agents, found)
        for name, ns in sorted(stray.items()):
            if name not in self._pods:
                log.info("deleting job %s/%s: no live allocation of this master", ns, name)
                await asyncio.to_thread(self._delete, ns, name)
        for ns in namespaces:
            threading.Thread(target=self._api.watch_pods, args=(ns, selector, self._from_thread, self._stop),
                             name=f"k8s-watch-{ns}", daemon=True).start()

    def adopt(self, alloc_id: str, state: str, agents: Sequence[str], found: Mapping[str, str]) -> bool:
        """Take back one allocation placed before the restart if all its Jobs are in ``found``
        (name -> namespace); else end it. Whether it was adopted."""
        names = [pods.job_name(alloc_id, rank) for rank in range(len(agents))]
        if state != "TERMINATING" and agents and all(n in found for n in names):
            for name, agent in zip(names, agents, strict=True):
                self._pods[name] = _Pod(alloc_id, agent, agent.partition("/")[0], found[name], name)
            self._ranks[alloc_id] = len(agents)
            self._allocs.adopted(alloc_id)
            what = "its Job" if len(names) == 1 else f"its {len(names)} Jobs"
            self._note(alloc_id, f"the master restarted; {what} kept running and the master took it back")
            log.info("adopted %s (%s)", alloc_id, ", ".join(f"{found[n]}/{n}" for n in names))
            return True
        if state == "TERMINATING":
            self._allocs.exited(alloc_id, 137, "killed (the master restarted while it stopped)")
        else:
            missing = [n for n in names if n not in found]
            self._note(alloc_id, f"the master restarted and found no Job {', '.join(missing)}: this run "
                                 "ended (a trial resumes from its latest checkpoint)", "WARNING")
            self._allocs.exited(alloc_id, None, "its Job was gone when the master restarted")
        return False

    # -- why tasks wait, in Kubernetes' terms (``_k8s_reasons``) ----------------------------

    def explain_wait(self, request: scheduler.Request, reason: str) -> str:
        """The scheduler's ``reason``, and, when the pool's nodes (at the last node sync) have
        no Ready node or too little room for ``request``, each node's room in Kubernetes' terms."""
        kind = self._k8s.slot_type
        resource = pods.GPU_RESOURCE.get(kind, "cpu")
        per_slot = 1.0 if kind in pods.GPU_RESOURCE else self._k8s.cpu_per_slot
        ours: dict[str, int] = {}  # node -> slots this master's tasks hold there
        for agent_id, agent in self.agents.items():
            node_name = self._node_of.get(agent_id, agent_id)
            ours[node_name] = ours.get(node_name, 0) + len(agent.taken())
        rooms = []
        for node in self._why.nodes:
            pool = node.labels.get(POOL_LABEL) or self.resources.default_compute_pool
            if (pool if pool in self.resources.pools else self.resources.default_compute_pool) != request.pool:
                continue
            rooms.append(reasons.node_room(node, self._why.others.get(node.name), resource=resource,
                                           ours=ours.get(node.name, 0) * per_slot))
        return reasons.explain(reason, rooms, slots=request.slots, pool=request.pool, resource=resource,
                               per_slot=per_slot, label=POOL_LABEL)

    def placement_problem(self, allocation_id: str) -> str | None:
        """Kubernetes' refusal to create the pod of one of the allocation's Jobs (a quota),
        while that Job still has no pod."""
        return next((self._why.problems[p.name] for p in list(self._pods.values())
                     if p.allocation_id == allocation_id and p.pod is None and p.name in self._why.problems),
                    None)

    async def _check_podless_forever(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(PODLESS_CHECK_S)
            try:
                await self.check_podless()
            except Exception:  # a bad round must not end the checks
                log.exception("checking the Jobs without a pod failed")

    async def check_podless(self) -> None:
        """Each Job that has had no pod for ``PODLESS_AFTER_S``: Kubernetes' latest Warning
        event about it (the Job controller's ``FailedCreate``: quota, admission) becomes the
        job's reason (``placement_problem``) and is written once in the task log. The task
        keeps waiting: the pod comes once Kubernetes allows it (a quota raised)."""
        now = self._clock.now()
        podless = {name: p for name, p in list(self._pods.items()) if p.pod is None and not (p.ended or p.killed)}
        self._why.forget(set(podless))
        for name in podless:
            self._why.podless_since.setdefault(name, now)
        # Those not explained yet first, then the longest without a pod.
        due = sorted((name in self._why.problems, since, name)
                     for name, since in self._why.podless_since.items() if now - since >= PODLESS_AFTER_S)
        for _, _, name in due[:PODLESS_ASKS]:
            p = podless[name]
            try:
                found = await asyncio.to_thread(self._api.warnings, p.namespace, "Job", name)
            except KubeError as exc:
                log.warning("cannot read the events of job %s/%s: %s", p.namespace, name, exc)
                continue
            if not found or p.pod is not None:
                continue
            why, message = found[-1]
            self._why.problems[name] = text = reasons.refusal(name, p.namespace, why, message)
            if (name, why) not in self._why.told:
                self._why.told.add((name, why))
                self._note(p.allocation_id, text, "WARNING")


def _iso(stamp: str) -> str:
    """Kubernetes' RFC 3339 time (nanoseconds) as ISO-8601 UTC with microseconds."""
    try:
        head, _, frac = stamp.rstrip("Z").partition(".")
        when = datetime.fromisoformat(head).replace(tzinfo=timezone.utc)
        micro = int((frac + "000000")[:6]) if frac else 0
        return when.replace(microsecond=micro).isoformat().replace("+00:00", "Z")
    except ValueError:
        return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
