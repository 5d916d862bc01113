"""The fair-share policy: each job's slots in proportion to demand × weight.

Determined's docs define the share (the code in 0.38 fills progressively instead, which
gives 4 and 4 in their own example): "slots are divided among the active experiments
according to the demand of each experiment ... A workload demand for slots is multiplied by
the workload weight". With 8 slots, demands 10 and 30 get 2 and 6; weights 3 and 1 on the
same demands give 4 and 4. A job never gets more than its demand (the rest goes to the
others in the same proportions) nor less than the slots it holds that cannot be preempted.
The shares divide the pool's enabled slots: work draining on disabled agents stays outside
them (but counts toward its job's ``max_slots``).

Per pool, each pass:

1. computes every job's share (:func:`fair_shares`); a job whose share could not run any of
   its pending requests (a gang larger than what it may get) gets no more than it holds,
   and its slots go to the others, newest such job first;
2. fills the jobs below their share (least served first, FIFO within a job) with requests
   no larger than what they lack, preempting allocations of jobs above their share (the
   most above first, newest first) when the free slots are not enough — only where that
   brings the victim's job closer to its share, so a pass never undoes the previous one;
3. gives free slots nobody below their share can use to anyone who can (work conserving:
   such slots are taken back by preemption once a job below its share can use them).

Zero-slot tasks are placed FIFO, apart from the shares.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ._model import Decisions, Request, Running, Snapshot, submission_key
from ._pool import PoolState, VictimFilter, run_pools


@dataclass(frozen=True)
class JobDemand:
    """One job's claim on a pool: slots it could use now, its weight, slots it must keep."""

    job: str
    demand: int
    weight: float = 1.0
    floor: int = 0


def ideal_shares(capacity: int, jobs: Sequence[JobDemand]) -> dict[str, Fraction]:
    """Exact shares: ``clamp(level × demand × weight, floor, demand)`` summing to capacity.

    The water level is found between the breakpoints where a job reaches its floor or its
    demand; between two of them the sum is linear, so the level is exact.
    """
    lo = {j.job: Fraction(j.floor) for j in jobs}
    hi = {j.job: Fraction(max(j.demand, j.floor)) for j in jobs}
    if sum(lo.values()) >= capacity:
        return lo
    if sum(hi.values()) <= capacity:
        return hi
    rate = {j.job: Fraction(j.demand) * Fraction(j.weight) for j in jobs}

    def at(level: Fraction) -> dict[str, Fraction]:
        return {j: min(max(level * rate[j], lo[j]), hi[j]) for j in rate}

    points = sorted({Fraction(0)} | {b[j] / rate[j] for b in (lo, hi) for j in rate if rate[j]})
    prev = points[0]
    for point in points[1:]:
        total = sum(at(point).values())
        if total >= capacity:
            below = sum(at(prev).values())
            level = prev + (point - prev) * (capacity - below) / (total - below)
            return at(level)
        prev = point
    raise AssertionError("the last breakpoint gives every job its demand")


def fair_shares(capacity: int, jobs: Sequence[JobDemand]) -> dict[str, int]:
    """Ideal shares in whole slots: each rounded down, the slots left over going to the
    largest remainders (earlier jobs in ``jobs`` first on ties); each within 1 of ideal."""
    ideal = ideal_shares(capacity, jobs)
    shares = {job: math.floor(x) for job, x in ideal.items()}
    left = int(sum(ideal.values())) - sum(shares.values())
    by_remainder = sorted(
        range(len(jobs)), key=lambda i: (shares[jobs[i].job] - ideal[jobs[i].job], i)
    )
    for i in by_remainder[:left]:
        shares[jobs[i].job] += 1
    return shares


def schedule_fair_share(
    snapshot: Snapshot,
    now: float,
    *,
    fitting: str = "best",
    preemption: bool = True,
    span_agents: bool = True,
) -> Decisions:
    """One pass of the fair-share policy over every pool of the snapshot."""
    del now
    return run_pools(
        snapshot, fitting=fitting, span=span_agents, order=submission_key,
        slots_pass=lambda state, queue: _schedule_slots(state, _feasible(state, queue), preemption),
    )


def _feasible(state: PoolState, queue: list[Request]) -> list[Request]:
    """The requests the pool could ever run (asked once per size: a queue has few)."""
    known: dict[tuple[int, int | None, frozenset[str]], bool] = {}
    out = []
    for req in queue:
        key = (req.slots, req.max_slots, req.requires)
        ok = known.get(key)
        if ok is None:
            ok = known[key] = state.feasible(req)
        if ok:
            out.append(req)
    return out


@dataclass
class _Job:
    weight: float = 1.0
    demand: int = 0
    floor: int = 0
    draining: int = 0
    max_slots: int | None = None
    pending: list[Request] = field(default_factory=list)


def pool_shares(state: PoolState, pending: Sequence[Request]) -> dict[str, int]:
    """Every job's share of the pool, after giving up on jobs that could not use theirs."""
    jobs = _jobs(state, pending)
    held = {j: _held(state, j) for j in jobs}
    demand = {j: _capped(info) for j, info in jobs.items()}
    while True:
        shares = fair_shares(
            state.capacity,
            [JobDemand(j, demand[j], info.weight, info.floor) for j, info in jobs.items()],
        )
        stuck = [
            j
            for j, info in reversed(jobs.items())
            if info.pending and 0 < shares[j] - held[j] < min(r.slots for r in info.pending)
        ]
        if not stuck:
            return shares
        demand[stuck[0]] = max(held[stuck[0]], jobs[stuck[0]].floor)


def _jobs(state: PoolState, pending: Sequence[Request]) -> dict[str, _Job]:
    """Jobs with slots held or wanted in the pool, oldest first (by their earliest allocation).

    ``pending`` comes in submission order (``run_pools`` sorted it), so each job's requests
    keep that order and only the jobs themselves are sorted.
    """
    jobs: dict[str, _Job] = {}
    first: dict[str, tuple[float, str]] = {}
    for run in state.running:
        if run.slots <= 0:
            continue
        job = run.job
        info = jobs.get(job) or jobs.setdefault(job, _Job())
        info.weight = run.weight
        key = (run.submitted_at, run.allocation_id)
        if job not in first or key < first[job]:
            first[job] = key
        if run.preempting:
            info.demand += run.slots  # it will be back, wanting its slots again
        else:
            info.demand += state.usable(run)
            info.floor += 0 if run.preemptible else state.usable(run)
            info.draining += run.slots - state.usable(run)
    for req in pending:
        job = req.job
        if job not in jobs:
            jobs[job] = _Job()
        info = jobs[job]
        if not info.pending:  # the job's earliest pending request (they come in order)
            key = (req.submitted_at, req.allocation_id)
            if job not in first or key < first[job]:
                first[job] = key
        info.weight = req.weight
        info.pending.append(req)
        info.max_slots = req.max_slots
        info.demand += req.slots
    return {job: jobs[job] for job in sorted(jobs, key=first.__getitem__)}


def _capped(info: _Job) -> int:
    """Demand within ``max_slots``, which also counts what the job holds on disabled agents."""
    if info.max_slots is None:
        return info.demand
    return max(0, min(info.demand, info.max_slots - info.draining))


def _held(state: PoolState, job: str) -> int:
    """Slots the job keeps on enabled agents: its allocations being preempted do not count."""
    return state.keeps[job]


def _schedule_slots(state: PoolState, pending: list[Request], preemption: bool) -> None:
    shares = pool_shares(state, pending)
    by_job: dict[str, list[Request]] = defaultdict(list)
    for req in pending:
        by_job[req.job].append(req)
    done: set[str] = set()
    for job in _least_served(state, shares, by_job):
        lacking = shares[job] - _held(state, job)
        for req in by_job[job]:
            if lacking <= 0:
                break  # every request here wants a slot or more
            if req.slots > lacking or not state.under_max(req):
                continue
            if state.place(req) or (
                preemption
                and state.make_room(req, _victims(state, shares, job), _closer(state, shares))
            ):
                lacking -= req.slots
                done.add(req.allocation_id)
    for job in _least_served(state, shares, by_job):
        for req in by_job[job]:
            if not state.free_total:
                return  # nothing more can be placed without preempting, which this step never does
            if req.allocation_id not in done and state.under_max(req):
                state.place(req)


def _least_served(
    state: PoolState, shares: dict[str, int], jobs: dict[str, list[Request]]
) -> list[str]:
    def served(job: str) -> tuple[int, Fraction]:
        share = shares.get(job, 0)
        return (
            (0, Fraction(_held(state, job), share)) if share else (1, Fraction(_held(state, job)))
        )

    return sorted(jobs, key=served)  # stable: oldest job first among equals


def _victims(state: PoolState, shares: dict[str, int], job: str) -> list[Running]:
    """Allocations of other jobs above their share: the most above first, newest first."""
    over = [
        run
        for run in state.running
        if run.job != job and run.slots > 0 and _held(state, run.job) > shares.get(run.job, 0)
    ]
    return sorted(
        over,
        key=lambda run: (
            shares.get(run.job, 0) - _held(state, run.job),
            -run.submitted_at,
            run.allocation_id,
        ),
    )


def _closer(state: PoolState, shares: dict[str, int]) -> VictimFilter:
    """Preempt only what brings the victim's job strictly closer to its share."""

    def may_take(run: Running, chosen: Sequence[Running]) -> bool:
        keeps = _held(state, run.job) - sum(state.usable(c) for c in chosen if c.job == run.job)
        return state.usable(run) < 2 * (keeps - shares.get(run.job, 0))

    return may_take
