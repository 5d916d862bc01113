"""Why a request still waits after a pass: the sentence the job queue shows (``waitReason``)."""

from __future__ import annotations

from collections import Counter

from ._fair_share import pool_shares
from ._model import Request, Snapshot, queue_key
from ._pool import PoolState

NEXT_PASS = "waiting for the next scheduling pass"
POLICY_NAMES = ("priority", "fair_share", "round_robin")


def wait_reason(
    snapshot: Snapshot, request: Request, *, policy: str = "priority", span_agents: bool = True
) -> str:
    """One sentence saying what ``request`` waits for, the most fundamental cause first:
    no agent, too large for its pool or ``max_slots``, its job's limits, the queue ahead of
    it (priority) or its job's share (fair share), then free slots."""
    if policy not in POLICY_NAMES:
        raise ValueError(f"policy must be one of {', '.join(POLICY_NAMES)}, got {policy!r}")
    state = PoolState(request.pool, snapshot, span=span_agents)
    if not state.totals:
        return _no_agent(snapshot, request.pool)
    if request.requires and not state.eligible(request.requires)[0]:
        return _no_feature(state, request)
    if request.slots == 0:
        return NEXT_PASS
    if request.max_slots is not None and request.slots > request.max_slots:
        return (
            f"needs {request.slots} slots but its job may hold at most {request.max_slots} "
            "(max_slots)"
        )
    if not state.feasible(request):
        return _too_large(snapshot, state, request)
    if not state.under_max(request):
        return (
            f"job {request.job} holds {state.held[request.job]} slots of its max_slots "
            f"{request.max_slots}; this request needs {request.slots} more"
        )
    competing = [
        r
        for r in snapshot.pending
        if r.pool == request.pool
        and r.slots > 0
        and r.allocation_id != request.allocation_id
        and state.feasible(r)
        and state.under_max(r)
    ]
    if policy == "priority":
        ahead = sorted((r for r in competing if queue_key(r) < queue_key(request)), key=queue_key)
        if ahead:
            return _behind(request, ahead)
    if policy == "fair_share":
        share = pool_shares(state, [*competing, request]).get(request.job, 0)
        held = state.keeps[request.job]
        if held + request.slots > share:
            return f"job {request.job} holds {held} slots and its fair share is {share}"
    return _free_slots(state, request)


def _no_agent(snapshot: Snapshot, pool: str) -> str:
    disabled = sum(1 for a in snapshot.agents if a.pool == pool)
    if disabled:
        return f"waiting for an agent of pool {pool} to be enabled ({disabled} disabled)"
    return f"waiting for an agent to join pool {pool}"


#: What an agent feature means, for the sentences that say none offers it.
FEATURE_WORDS = {"docker": "a Docker engine"}
FEATURE_WHY = {"docker": "its config sets environment.image; start an agent on a host with Docker, "
                         "or remove the image to run as a process"}


def _features(request: Request) -> str:
    return " and ".join(FEATURE_WORDS.get(f, f"the feature {f!r}") for f in sorted(request.requires))


def _no_feature(state: PoolState, request: Request) -> str:
    n = len(state.totals)
    why = "; ".join(FEATURE_WHY[f] for f in sorted(request.requires) if f in FEATURE_WHY)
    return (f"needs an agent with {_features(request)}, and none of the "
            f"{_count(n, 'enabled agent')} of pool {state.pool} has one" + (f" ({why})" if why else ""))


def _too_large(snapshot: Snapshot, state: PoolState, request: Request) -> str:
    if request.requires:
        ids, capacity, biggest = state.eligible(request.requires)
        if not state.spans(request.slots, request.requires):
            return (f"needs {request.slots} slots on one agent with {_features(request)}, but the "
                    f"largest such agent of pool {state.pool} has {biggest}")
        return (f"needs {request.slots} slots on agents with {_features(request)}, but pool "
                f"{state.pool} has {capacity} on its {_count(len(ids), 'such agent')}")
    if not state.span_allowed:
        return (
            f"needs {request.slots} slots on one agent but the largest agent of pool "
            f"{state.pool} has {state.largest_agent}"
        )
    sizes: Counter[str] = Counter()
    for agent in snapshot.agents:
        if agent.enabled:
            sizes[agent.pool] += agent.total
    largest = min(sizes, key=lambda pool: (-sizes[pool], pool != state.pool, pool))
    if largest == state.pool:
        return f"needs {request.slots} slots but the largest pool ({largest}) has {state.capacity}"
    return (
        f"needs {request.slots} slots but pool {state.pool} has {state.capacity} "
        f"(the largest pool, {largest}, has {sizes[largest]})"
    )


def _behind(request: Request, ahead: list[Request]) -> str:
    others = [r for r in ahead if r.job != request.job]
    if not others:
        return f"behind {_count(len(ahead), 'earlier request')} of its own job {request.job}"
    first = others[0]
    more = f" and {_count(len(ahead) - 1, 'more request')}" if len(ahead) > 1 else ""
    return f"behind job {first.job} (priority {first.priority}){more}"


def _free_slots(state: PoolState, request: Request) -> str:
    agents = state.eligible(request.requires)[0] if request.requires else state.free
    free = {agent: len(state.free[agent]) for agent in agents}
    total = sum(free.values())
    releasing = sum(len(state.releasing[agent]) for agent in agents)
    where = f"pool {state.pool}" + (f"'s agents with {_features(request)}" if request.requires else "")
    if total < request.slots and releasing:
        return (
            f"waiting for {request.slots} free slots; {total} are free in {where} "
            f"and {releasing} more are being released by preempted allocations"
        )
    if total < request.slots:
        return f"waiting for {request.slots} free slots; {total} are free in {where}"
    most = max(free.values(), default=0)
    if not state.spans(request.slots, request.requires) and most < request.slots:
        return (
            f"waiting for {request.slots} free slots on one agent; {total} are free in "
            f"{where} but at most {most} on one agent"
        )
    return NEXT_PASS


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
