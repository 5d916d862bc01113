"""One resource pool as a scheduling pass sees it, updated as the pass decides.

Pools are scheduled independently (Determined: "each resource pool handles scheduling
independently"), so every policy builds one :class:`PoolState` per pool, walks its requests
in its own order, and reads the decisions back. The state is private to one call of a pure
policy; nothing here outlives the pass.

Three kinds of slots: *free* ones, *releasing* ones (held by allocations asked to preempt:
they come free once the master sees them exit), and *reserved* ones (free or releasing slots
a waiting request has claimed, so nothing queued behind it takes them meanwhile).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from ._fit import check_fitting, fit
from ._model import Decisions, Placement, Request, Running, Snapshot

# May this allocation be preempted, given the victims chosen so far for the same request?
VictimFilter = Callable[[Running, Sequence[Running]], bool]


class PoolState:
    def __init__(
        self, pool: str, snapshot: Snapshot, *, fitting: str = "best", span: bool = True
    ) -> None:
        self.pool = pool
        self.fitting = fitting
        self.span_allowed = span
        agents = [a for a in snapshot.agents if a.pool == pool]
        enabled = [a for a in agents if a.enabled]
        self.totals = {a.agent_id: a.total for a in enabled}
        self._capacity = sum(self.totals.values())
        self._largest = max(self.totals.values(), default=0)
        self.features = {a.agent_id: a.features for a in enabled}
        # Per set of required features: the agents offering them, their slots, the largest.
        self._eligible: dict[frozenset[str], tuple[frozenset[str], int, int]] = {}
        self.free: dict[str, set[int]] = {a.agent_id: set(a.free) for a in enabled}
        self.free_total = sum(len(ids) for ids in self.free.values())  # kept by _take
        self.releasing: dict[str, set[int]] = {a.agent_id: set() for a in enabled}
        self.running = [r for r in snapshot.running if r.pool == pool]
        # Per job: every slot held, reserved or assigned (what max_slots caps) ...
        self.held: Counter[str] = Counter()
        # ... and the part it keeps on enabled agents, not preempting: what fair share counts
        # (work draining on disabled agents is outside the pool's share).
        self.keeps: Counter[str] = Counter()
        self.zero_tasks: Counter[str] = Counter()  # agent -> zero-slot tasks on it
        for run in self.running:
            self.held[run.job] += run.slots
            if run.preempting:
                self._release(run, counted=False)
            else:
                self.keeps[run.job] += self.usable(run)
            for piece in run.placement:
                if not piece.slot_ids:
                    self.zero_tasks[piece.agent_id] += 1
        self.assignments: dict[str, tuple[Placement, ...]] = {}
        self.preemptions: list[str] = []

    # -- what the pool could ever do -----------------------------------------------------

    @property
    def capacity(self) -> int:
        """Slots on the pool's enabled agents."""
        return self._capacity

    @property
    def largest_agent(self) -> int:
        return self._largest

    def eligible(self, requires: frozenset[str]) -> tuple[frozenset[str], int, int]:
        """The enabled agents offering every feature in ``requires``, their slots, and the
        largest one's."""
        known = self._eligible.get(requires)
        if known is None:
            ids = frozenset(a for a, offered in self.features.items() if requires <= offered)
            known = (ids, sum(self.totals[a] for a in ids), max((self.totals[a] for a in ids), default=0))
            self._eligible[requires] = known
        return known

    def spans(self, slots: int, requires: frozenset[str] = frozenset()) -> bool:
        """A gang spans agents only when no single agent of the pool (that offers what it
        requires) could ever hold it."""
        largest = self.eligible(requires)[2] if requires else self.largest_agent
        return self.span_allowed and slots > largest

    def feasible(self, req: Request) -> bool:
        """Could this request run at all, were the pool empty? If not it never blocks others."""
        if not self.totals:
            return False
        if req.max_slots is not None and req.slots > req.max_slots:
            return False
        if req.requires:
            ids, capacity, largest = self.eligible(req.requires)
            if not ids:
                return False
        else:
            capacity, largest = self.capacity, self.largest_agent
        limit = capacity if self.spans(req.slots, req.requires) else largest
        return req.slots <= limit

    def under_max(self, req: Request) -> bool:
        """Would the job stay within ``max_slots`` with this request placed?"""
        return req.max_slots is None or self.held[req.job] + req.slots <= req.max_slots

    def usable_agents(self, req: Request) -> set[str]:
        """The agents whose slots this request could ever use."""
        agents = self.eligible(req.requires)[0] if req.requires else self.totals
        if self.spans(req.slots, req.requires):
            return set(agents)
        return {a for a in agents if self.totals[a] >= req.slots}

    def _allowed(self, req: Request, agents: Collection[str] | None) -> Collection[str] | None:
        """``agents`` (None: all) narrowed to those offering what ``req`` requires."""
        if not req.requires:
            return agents
        ids = self.eligible(req.requires)[0]
        return ids if agents is None else ids.intersection(agents)

    # -- placing -------------------------------------------------------------------------

    def place(self, req: Request, agents: Collection[str] | None = None) -> bool:
        """Assign the request to free slots now (on ``agents`` only, if given)."""
        agents = self._allowed(req, agents)
        if req.slots == 0:
            return self._place_zero(req, agents)
        if req.slots > self.free_total:
            return False  # cheap: a full pool is the common case behind a long queue
        placement = self._fit(req, self._view(agents))
        if placement is None:
            return False
        self._take(placement)
        self.assignments[req.allocation_id] = placement
        self._count(req)
        return True

    def make_room(
        self,
        req: Request,
        candidates: Iterable[Running],
        may_take: VictimFilter = lambda run, chosen: True,
        agents: Collection[str] | None = None,
    ) -> bool:
        """Reserve room for ``req`` among slots being released, preempting what it takes.

        If the slots already being released (plus free ones) are enough, it waits for them
        and nothing more is preempted. Otherwise ``candidates`` are taken in order (the
        policy's preemption order) until the request fits; then each chosen victim, the
        most valuable first, is spared again if the request still fits without it. True
        when room is reserved; False leaves the state as it was (nothing is preempted for a
        request that would not fit anyway).
        """
        view = self._view(self._allowed(req, agents), releasing=True)
        placement = self._fit(req, view)
        chosen: list[Running] = []
        if placement is None:
            chosen = self._choose_victims(req, view, candidates, may_take)
            if not chosen:
                return False
            placement = self._fit(req, _with(view, chosen))
        assert placement is not None  # _choose_victims only returns a set that fits
        for victim in chosen:
            self._release(victim)
            self.preemptions.append(victim.allocation_id)
        self._take(placement)
        self._count(req)
        return True

    # -- internals -----------------------------------------------------------------------

    def _fit(self, req: Request, view: dict[str, list[int]]) -> tuple[Placement, ...] | None:
        return fit(req.slots, view, self.totals, fitting=self.fitting,
                   span=self.spans(req.slots, req.requires))

    def _view(
        self, agents: Collection[str] | None, releasing: bool = False
    ) -> dict[str, list[int]]:
        ids = self.totals if agents is None else [a for a in self.totals if a in agents]
        return {
            a: sorted(self.free[a] | self.releasing[a]) if releasing else sorted(self.free[a])
            for a in ids
        }

    def _choose_victims(
        self,
        req: Request,
        view: dict[str, list[int]],
        candidates: Iterable[Running],
        may_take: VictimFilter,
    ) -> list[Running]:
        chosen: list[Running] = []
        for run in candidates:
            if run.preempting or not run.preemptible or run.allocation_id in self.preemptions:
                continue
            if not any(p.agent_id in view and p.slot_ids for p in run.placement):
                continue  # it frees nothing this request could use
            if not may_take(run, chosen):
                continue
            chosen.append(run)
            if self._fit(req, _with(view, chosen)) is not None:
                break
        else:
            return []
        # The last victim was needed (without it nothing fit); the others may not be.
        for run in reversed(chosen[:-1]):
            rest = [c for c in chosen if c is not run]
            if self._fit(req, _with(view, rest)) is not None:
                chosen = rest
        return chosen

    def _count(self, req: Request) -> None:
        self.held[req.job] += req.slots
        self.keeps[req.job] += req.slots

    def usable(self, run: Running) -> int:
        """The slots it holds on the pool's enabled agents."""
        return sum(len(p.slot_ids) for p in run.placement if p.agent_id in self.totals)

    def _release(self, run: Running, counted: bool = True) -> None:
        if counted:
            self.keeps[run.job] -= self.usable(run)
        for piece in run.placement:
            if piece.agent_id in self.releasing:
                self.releasing[piece.agent_id].update(piece.slot_ids)

    def _take(self, placement: tuple[Placement, ...]) -> None:
        for agent, slot_ids in placement:
            before = len(self.free[agent])
            self.free[agent].difference_update(slot_ids)
            self.free_total -= before - len(self.free[agent])
            self.releasing[agent].difference_update(slot_ids)

    def _place_zero(self, req: Request, agents: Collection[str] | None = None) -> bool:
        """Zero-slot tasks need an agent of their pool but no slots; spread them out."""
        ids = self.totals if agents is None else [a for a in agents if a in self.totals]
        if not ids:
            return False
        agent = min(ids, key=lambda a: (self.zero_tasks[a], a))
        self.zero_tasks[agent] += 1
        self.assignments[req.allocation_id] = (Placement(agent, ()),)
        return True


def _with(view: dict[str, list[int]], victims: Sequence[Running]) -> dict[str, list[int]]:
    """The view plus the slots the victims would release on its agents."""
    merged = {a: set(ids) for a, ids in view.items()}
    for run in victims:
        for piece in run.placement:
            if piece.agent_id in merged:
                merged[piece.agent_id].update(piece.slot_ids)
    return {a: sorted(ids) for a, ids in merged.items()}


def run_pools(
    snapshot: Snapshot,
    *,
    fitting: str,
    span: bool,
    order: Callable[[Request], Any],
    slots_pass: Callable[[PoolState, list[Request]], None],
) -> Decisions:
    """The frame of every policy: per pool, pending requests in ``order``, zero-slot ones placed
    at once, ``slots_pass`` given the rest; every pool's decisions, pool by pool."""
    check_fitting(fitting)
    assignments: dict[str, tuple[Placement, ...]] = {}
    preemptions: list[str] = []
    pools = snapshot.pools()
    for pool in pools:
        state = PoolState(pool, snapshot, fitting=fitting, span=span)
        mine = snapshot.pending if len(pools) == 1 else [r for r in snapshot.pending if r.pool == pool]
        pending = sorted(mine, key=order)
        for req in pending:
            if req.slots == 0:
                state.place(req)
        slots_pass(state, [r for r in pending if r.slots > 0])
        assignments.update(state.assignments)
        preemptions.extend(state.preemptions)
    return Decisions(assignments, tuple(preemptions))
