"""Why a task waits, in Kubernetes' own terms: the sentences the Kubernetes resource manager
adds to the job queue's wait reasons and writes in task logs (pure: plain values in, text out).

Two causes: a request the pool's nodes have no room for (:func:`insufficient`: per node, what
it has allocatable and what other pods request of it), and a created Job whose pod Kubernetes
will not make (:func:`refusal`: a namespace's ResourceQuota, an admission webhook), which the
Job controller reports only as a ``FailedCreate`` event of the Job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._kube_api import Node, quantity_value

__all__ = ["NodeRoom", "WaitNotes", "explain", "insufficient", "no_node", "node_room", "refusal", "slots_free"]


@dataclass(frozen=True)
class NodeRoom:
    """One node of a pool as the last node sync saw it, in units of the slot resource
    (GPUs, or CPUs for ``slot_type: cpu``)."""

    name: str
    ready: bool
    cordoned: bool
    allocatable: float
    others: float  # requested by pods that are not this master's
    ours: float  # held by this master's tasks
    pods_left: int  # pods its kubelet still admits (``allocatable.pods`` less other pods)


def node_room(node: Node, taken: Mapping[str, float] | None, *, resource: str, ours: float) -> NodeRoom:
    """``node`` with ``taken`` (what other pods request there, by resource) in the terms of
    ``resource`` (``cpu``, ``nvidia.com/gpu``...); ``ours``: what this master's tasks hold."""
    taken = taken or {}
    pods = quantity_value(node.allocatable.get("pods", "110")) - taken.get("pods", 0.0)
    return NodeRoom(node.name, node.ready, node.unschedulable,
                    quantity_value(node.allocatable.get(resource, "0")), taken.get(resource, 0.0),
                    ours, max(int(pods), 0))


def _num(x: float) -> str:
    """A quantity as people write it: whole numbers bare, CPUs to the millicore."""
    return f"{round(x, 3):g}"


def _node_text(room: NodeRoom) -> str:
    if not room.ready:
        return f"{room.name} not Ready"
    text = f"{room.name} {_num(room.allocatable)} allocatable"
    held = [f"{_num(room.others)} requested by other pods"] if room.others > 0 else []
    if room.ours > 0:
        held.append(f"{_num(room.ours)} by this master's tasks")
    if held:
        text += " of which " + " and ".join(held)
    if room.pods_left <= 0:
        text += ", and its kubelet admits no more pods"
    if room.cordoned:
        text += " (cordoned)"
    return text


def insufficient(rooms: Sequence[NodeRoom], *, resource: str, slots: int, per_slot: float = 1.0) -> str:
    """Why ``slots`` slots of ``resource`` (``per_slot`` of it each) find no room on the pool's
    nodes ``rooms``: ``Kubernetes: insufficient nvidia.com/gpu on every node: node-a 0
    allocatable, node-b 2 allocatable of which 2 requested by other pods``. CPU slots also say
    the slot size and what the request needs in CPUs."""
    nodes = ", ".join(_node_text(r) for r in sorted(rooms, key=lambda r: r.name)) or "the pool has none"
    text = f"Kubernetes: insufficient {resource} on every node: {nodes}"
    if resource == "cpu":
        need = slots * per_slot
        text += (f"; a slot is {_num(per_slot)} CPU, so {slots} slot{'s' if slots != 1 else ''} "
                 f"need{'s' if slots == 1 else ''} {_num(need)} CPU{'s' if need != 1 else ''}")
    return text


def no_node(rooms: Sequence[NodeRoom], *, pool: str, label: str) -> str:
    """Why pool ``pool`` has no agent: its nodes (``rooms``) are not Ready, or no node is in it."""
    if not rooms:
        return f"Kubernetes: no node is in pool {pool} (a node's label {label} names its pool)"
    states = ", ".join(f"{r.name} {'not Ready' if not r.ready else 'cordoned'}"
                       for r in sorted(rooms, key=lambda r: r.name) if not r.ready or r.cordoned)
    return f"Kubernetes: no node of pool {pool} is Ready: {states}" if states else ""


def slots_free(room: NodeRoom, per_slot: float) -> int:
    """The slots ``room`` still has for this master (what the manager offers, less ours)."""
    if not room.ready or room.cordoned:
        return 0
    count = math.floor((room.allocatable - room.others - room.ours) / per_slot + 1e-9)
    return max(min(count, room.pods_left), 0)


def explain(reason: str, rooms: Sequence[NodeRoom], *, slots: int, pool: str, resource: str,
            per_slot: float, label: str) -> str:
    """The scheduler's ``reason`` for a request of ``slots`` in ``pool`` whose nodes are
    ``rooms``, with Kubernetes' cause when there is one: no Ready node, or too little room."""
    if not any(r.ready and not r.cordoned for r in rooms):
        extra = no_node(rooms, pool=pool, label=label)
    elif slots > sum(slots_free(r, per_slot) for r in rooms):
        extra = insufficient(rooms, resource=resource, slots=slots, per_slot=per_slot)
    else:
        extra = ""
    return f"{reason} ({extra})" if extra else reason


def refusal(job: str, namespace: str, reason: str, message: str) -> str:
    """A created Job's pod that Kubernetes will not make: the Job controller's event (``reason``:
    ``FailedCreate``, ``message``: the API server's refusal), and that the task waits."""
    text = (f"Kubernetes does not create the pod of Job {job} in namespace {namespace} "
            f"({reason}): {message.strip()}")
    if "quota" in message:
        text += (f"; the task waits until the namespace's ResourceQuota allows it "
                 f"(kubectl -n {namespace} describe resourcequota)")
    else:
        text += "; the task waits until Kubernetes creates it"
    return text


@dataclass
class WaitNotes:
    """What the manager keeps to explain waits: the last node sync, and per Job without a pod
    since when it has none, Kubernetes' refusal of it, and which refusals the task log has."""

    nodes: Sequence[Node] = ()
    others: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    podless_since: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    told: set[tuple[str, str]] = field(default_factory=set)

    def forget(self, live: set[str]) -> None:
        """Drop what is kept of the Jobs not in ``live`` (they have a pod now, or ended)."""
        for name in set(self.podless_since) - live:
            del self.podless_since[name]
        for name in set(self.problems) - live:
            del self.problems[name]
        self.told = {t for t in self.told if t[0] in live}
