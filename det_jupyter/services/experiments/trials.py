"""Trials: creating them, running them (one allocation per run) and deciding what an exit means.

Exit rules (0.38.1, plus the searcher stop reaching the trial as a preemption signal):
- a trial in STOPPING_* ends in that state's terminal state, whatever the exit code;
- a PAUSED trial stays paused (it checkpointed and acked, or was killed after its timeout);
- exit 0 after acking a preemption → queued again, resumes from its latest checkpoint;
- exit 0 otherwise → COMPLETED (with its early-exit reason, if it reported one);
- any other exit → restart from the latest checkpoint until ``max_restarts`` is spent, then ERROR.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ... import searcher as search
from ...errors import NotFound
from ...store import reader
from ...store import tables as t
from ..allocation.service import AllocationService, Gang
from ..allocation.spec import trial_spec
from ..common.clock import Clock
from ..common.states import STOPPING, STOPPING_END, TERMINAL, AllocState, State
from ..metrics.service import recompute_summary
from ._warm_start import warm_start_checkpoint
from .searcher_log import SearcherEvent

# The statements of every trial run, built once: SQLAlchemy then skips building them and
# computing their cache keys on each call (a third of their cost). They never read an
# experiment's searcher state (large JSON) nor its config (read once and kept, see _config).
_P = sa.bindparam
# A trial with what its runs need of its experiment: its state and its owner's name.
_TRIALS = (
    sa.select(t.trials, t.experiments.c.state.label("exp_state"), t.users.c.username)
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    .join(t.users, t.users.c.id == t.experiments.c.owner_id)
    .where(t.trials.c.id.in_(_P("ids", expanding=True)))
)
_CKPT_STEPS = sa.select(t.checkpoints.c.steps_completed).where(t.checkpoints.c.uuid == _P("uuid"))
_START_RUN = (
    sa.update(t.trials).where(t.trials.c.id == _P("trial_id"))
    .values(run_id=_P("run_id"), total_batches=_P("steps"))
)
_END = (
    sa.update(t.trials).where(t.trials.c.id == _P("trial_id"))
    .values(state=_P("state"), end_time=_P("end_time"))
)
_REQUEST_INFO = (
    sa.select(t.trials.c.task_id, t.experiments.c.job_id, t.jobs.c.priority, t.jobs.c.resource_pool)
    .select_from(t.trials)
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
    .outerjoin(t.jobs, t.jobs.c.job_id == t.experiments.c.job_id)
    .where(t.trials.c.id == _P("trial_id"))
)
# The searcher's stop of a trial that is neither stopping nor over, in one statement: its id,
# or None where it did not apply.
_SEARCHER_STOP = (
    sa.update(t.trials)
    .where(t.trials.c.experiment_id == _P("exp_id"), t.trials.c.request_id == _P("stop_request"),
           t.trials.c.state.not_in(sorted(s.value for s in TERMINAL | STOPPING)))
    .values(state=State.STOPPING_COMPLETED.value, searcher_stopped=True)
    .returning(t.trials.c.id)
)
DEFAULT_PRIORITY = 42


@dataclass(frozen=True)
class MasterIdentity:
    """What a task needs to know of the master it belongs to."""

    url: str
    master_id: str
    cluster_id: str
    preemption_timeout_s: float = 3600.0


class TrialService:
    def __init__(
        self, engine: sa.Engine, clock: Clock, allocations: AllocationService, identity: MasterIdentity
    ) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._allocs = allocations
        self._identity = identity
        self._deferred: list[Callable[[], None]] = []
        self._context_digests: dict[int, str | None] = {}
        self._configs: dict[int, tuple[dict, str]] = {}
        self.experiments: Any = None  # ExperimentService, wired by the Master
        self.searcher_batch: Any = None  # SearcherBatcher, wired by the Master
        self.resources: Any = None  # rm.config.ResourceConfig, wired by the Master
        self.on_trial_end: Callable[[int], None] = lambda _exp_id: None  # after its end commits: GC

    # -- effects that must wait for the caller's transaction to commit ------------------

    def flush(self) -> None:
        """Run the side effects queued by calls made inside a transaction."""
        while self._deferred:
            self._deferred.pop(0)()

    def discard_deferred(self) -> None:
        """Forget effects of a transaction that rolled back."""
        self._deferred.clear()

    # -- creation -----------------------------------------------------------------------

    def create(self, conn: sa.Connection, exp: sa.Row, action: search.Create) -> int:
        trial_id = conn.execute(
            sa.insert(t.trials)
            .values(
                experiment_id=exp.id,
                request_id=action.request_id,
                task_id=f"{exp.id}.{action.request_id}",
                state=State.PAUSED.value if exp.state == State.PAUSED.value else State.ACTIVE.value,
                hparams=action.hparams,
                seed=action.trial_seed,
                restarts=0,
                run_id=0,
                total_batches=0,
                searcher_stopped=False,
                start_time=self._clock.now(),
                # warm start: the trial's first allocation loads the source checkpoint
                latest_checkpoint=warm_start_checkpoint(conn, exp.config.get("searcher")),
            )
            .returning(t.trials.c.id)
        ).scalar_one()
        if exp.state != State.PAUSED.value:
            self._request(conn, trial_id, exp.config, first=True)
        return trial_id

    def _request(self, conn: sa.Connection, trial_id: int, config: dict, *, first: bool = False) -> None:
        """Ask for the trial's next allocation (``first``: a trial just created, which has none)."""
        row = conn.execute(_REQUEST_INFO, {"trial_id": trial_id}).one()
        res = config.get("resources", {})
        slots = int(res.get("slots_per_trial", 1))
        pool = row.resource_pool if row.resource_pool is not None else (res.get("resource_pool") or "")
        if self.resources is not None:
            pool = self.resources.pool_for(pool, slots)
        self._allocs.request(
            conn,
            task_id=row.task_id,
            trial_id=trial_id,
            slots=slots,
            priority=row.priority if row.priority is not None else int(res.get("priority") or DEFAULT_PRIORITY),
            resource_pool=pool,
            job_id=row.job_id,
            before=0 if first else None,
        )
        if self._allocs.launcher is not None:
            self._deferred.append(self._allocs.launcher.schedule_soon)

    # -- stopping -----------------------------------------------------------------------

    def _open_allocation(self, conn: sa.Connection, trial_id: int) -> str | None:
        return conn.execute(
            sa.select(t.allocations.c.allocation_id).where(
                t.allocations.c.trial_id == trial_id,
                t.allocations.c.state != AllocState.TERMINATED.value,
            )
        ).scalar()

    def searcher_stop(self, conn: sa.Connection, exp_id: int, request_id: str) -> None:
        """The searcher is done with this trial: ask it to stop at its next check (unless it
        is stopping or over already)."""
        trial_id = conn.execute(_SEARCHER_STOP, {"exp_id": exp_id, "stop_request": request_id}).scalar()
        if trial_id is not None:
            self._stop_allocation_later(conn, trial_id, graceful=True)

    def _stop_allocation_later(self, conn: sa.Connection, trial_id: int, *, graceful: bool) -> None:
        alloc_id = self._open_allocation(conn, trial_id)
        if alloc_id is None:
            self._deferred.append(lambda: self._finish_without_allocation(trial_id))
        elif graceful:
            timeout = self._identity.preemption_timeout_s
            self._deferred.append(lambda: self._allocs.preempt(alloc_id, timeout))
        else:
            self._deferred.append(lambda: self._allocs.kill(alloc_id))

    def _finish_without_allocation(self, trial_id: int) -> None:
        """A stopping trial that has nothing running ends now."""
        with self._engine.begin() as conn:
            trial = conn.execute(sa.select(t.trials).where(t.trials.c.id == trial_id)).one()
            state = State(trial.state)
            if state not in STOPPING:
                return
            self._end(conn, trial, STOPPING_END[state])
        if state == State.STOPPING_COMPLETED:
            self.experiments.searcher_event(trial.experiment_id, SearcherEvent("trial_closed", trial.request_id))
        self.experiments.maybe_finish(trial.experiment_id)

    def pause_all(self, exp_id: int) -> None:
        timeout = self._identity.preemption_timeout_s
        with self._engine.begin() as conn:
            for trial in conn.execute(
                sa.select(t.trials).where(t.trials.c.experiment_id == exp_id, t.trials.c.state == State.ACTIVE.value)
            ).all():
                conn.execute(sa.update(t.trials).where(t.trials.c.id == trial.id).values(state=State.PAUSED.value))
                alloc_id = self._open_allocation(conn, trial.id)
                if alloc_id is not None:
                    self._deferred.append(lambda a=alloc_id: self._allocs.preempt(a, timeout))
        self.flush()

    def resume_all(self, exp_id: int) -> None:
        with self._engine.begin() as conn:
            config = self.experiment_config(conn, exp_id)
            for trial in conn.execute(
                sa.select(t.trials).where(t.trials.c.experiment_id == exp_id, t.trials.c.state == State.PAUSED.value)
            ).all():
                conn.execute(sa.update(t.trials).where(t.trials.c.id == trial.id).values(state=State.ACTIVE.value))
                if self._open_allocation(conn, trial.id) is None:
                    self._request(conn, trial.id, config)
        self.flush()

    def stop_all(self, exp_id: int, target: State, *, graceful: bool) -> None:
        with self._engine.begin() as conn:
            for trial in conn.execute(
                sa.select(t.trials).where(
                    t.trials.c.experiment_id == exp_id, t.trials.c.state.not_in([s.value for s in TERMINAL])
                )
            ).all():
                if State(trial.state) == State.STOPPING_COMPLETED and target == State.STOPPING_CANCELED:
                    continue  # already on its way out
                conn.execute(sa.update(t.trials).where(t.trials.c.id == trial.id).values(state=target.value))
                self._stop_allocation_later(conn, trial.id, graceful=graceful)
        self.flush()

    def _end(self, conn: sa.Connection, trial: Any, state: State, ends: list[dict] | None = None) -> None:
        """End the trial (its row) in ``state``: now, or added to ``ends`` for the caller to
        write."""
        params = {"trial_id": trial.id, "state": state.value, "end_time": self._clock.now()}
        if ends is None:
            conn.execute(_END, params)
        else:
            ends.append(params)
        exp_id = trial.experiment_id
        self._deferred.append(lambda: self.on_trial_end(exp_id))

    # -- running ------------------------------------------------------------------------

    def build_specs_many(
        self, runs: Sequence[tuple[Any, Gang, str]], conn: sa.Connection
    ) -> dict[str, list[dict]]:
        """Start new runs of a pass's trials, in ``conn`` (the placements' transaction): rewind
        metrics past each one's checkpoint, build one spec per container of its gang; the specs
        by allocation id. One read of the trials and one write of their new runs
        (executemany), whatever the pass's size."""
        if not runs:
            return {}
        trials = {r.id: r for r in conn.execute(_TRIALS, {"ids": [a.trial_id for a, _, _ in runs]})}
        starts, out = [], {}
        for alloc, gang, token in runs:
            trial = trials[alloc.trial_id]
            exp_id, owner = trial.experiment_id, trial.username
            self.experiment_config(conn, exp_id)  # trial_spec reads it from the cache
            ckpt_steps = 0
            if trial.latest_checkpoint:
                ckpt_steps = conn.execute(_CKPT_STEPS, {"uuid": trial.latest_checkpoint}).scalar() or 0
            run_id = trial.run_id + 1
            if trial.run_id:  # a first run has nothing to rewind
                # Whatever an earlier run reported past the checkpoint will be reported again.
                conn.execute(
                    sa.update(t.metrics)
                    .where(t.metrics.c.trial_id == trial.id, t.metrics.c.steps_completed > ckpt_steps)
                    .values(archived=True)
                )
                recompute_summary(conn, trial.id, self.experiment_config(conn, exp_id))
            starts.append({"trial_id": trial.id, "run_id": run_id, "steps": ckpt_steps})
            # (The allocation's run id was set with its placement: see allocations' ASSIGN.)
            digest = self._context_digest(conn, exp_id)
            specs = []
            for rank in range(len(gang.containers)):
                config, config_json = self._configs[exp_id]
                spec = trial_spec(alloc, trial, exp_id, config, config_json, owner, run_id, ckpt_steps,
                                  gang, rank, token, self._identity)
                if digest:
                    spec["context_digest"] = digest
                specs.append(spec)
            out[alloc.allocation_id] = specs
        if starts:
            conn.execute(_START_RUN, starts)
        return out

    def experiment_config(self, conn: sa.Connection, exp_id: int) -> dict:
        """The experiment's expanded config, read once per master run with its JSON text
        (every run of every trial gets it as DET_EXPERIMENT_CONFIG)."""
        cached = self._configs.get(exp_id)
        if cached is None:
            config = conn.execute(
                sa.select(t.experiments.c.config).where(t.experiments.c.id == exp_id)).scalar_one()
            cached = self._configs[exp_id] = (config, json.dumps(config))
        return cached[0]

    def forget_configs(self) -> None:
        """Configs were edited (a job's resources are mirrored into its experiment's config)."""
        self._configs.clear()

    def _context_digest(self, conn: sa.Connection, exp_id: int) -> str | None:
        """``sha256:<hex>`` of the experiment's context archive (immutable, so hashed once per
        master run): agents keep extracted contexts by it and download each one once."""
        if exp_id not in self._context_digests:
            tgz = conn.execute(
                sa.select(t.experiment_contexts.c.tgz).where(t.experiment_contexts.c.experiment_id == exp_id)
            ).scalar()
            self._context_digests[exp_id] = f"sha256:{hashlib.sha256(tgz).hexdigest()}" if tgz else None
        return self._context_digests[exp_id]

    def allocations_exited(
        self, ended: Sequence[tuple[Any, int | None, str | None]], conn: sa.Connection
    ) -> list[Callable[[], None] | None]:
        """Decide what a turn's exits mean for their trials (restart, completion, error),
        written in ``conn`` (the allocations' own end); what must follow the commit, in order.
        One read of the trials and one write of those that ended (executemany)."""
        ids = [a.trial_id for a, _, _ in ended if a.trial_id is not None]
        trials = {r.id: r for r in conn.execute(_TRIALS, {"ids": ids})} if ids else {}
        ends: list[dict] = []
        follows = [None if alloc.trial_id is None else
                   self._exited(alloc, exit_code, reason, conn, trials[alloc.trial_id], ends)
                   for alloc, exit_code, reason in ended]
        if ends:
            conn.execute(_END, ends)
        return follows

    def _exited(self, alloc: Any, exit_code: int | None, reason: str | None, conn: sa.Connection,
                trial: Any, ends: list[dict]) -> Callable[[], None]:
        """One exit's decision; trials that end are added to ``ends`` (written by the caller)."""
        searcher_events: list[SearcherEvent] = []
        config = self.experiment_config(conn, trial.experiment_id)
        state = State(trial.state)
        rid = trial.request_id
        if state in STOPPING:
            self._end(conn, trial, STOPPING_END[state], ends)
            if state == State.STOPPING_COMPLETED:
                searcher_events.append(SearcherEvent("trial_closed", rid))
            elif (state in (State.STOPPING_KILLED, State.STOPPING_CANCELED)
                  and trial.exp_state in (State.ACTIVE.value, State.PAUSED.value)):
                # This trial alone was killed (its experiment goes on): the searcher hears it
                # was canceled and closed, as 0.38.1's does, so the search can finish (an
                # experiment of one trial then ends CANCELED).
                searcher_events.append(SearcherEvent("trial_exited_early", rid,
                                                     reason=search.ExitedReason.USER_CANCELED.value))
                searcher_events.append(SearcherEvent("trial_closed", rid))
        elif state == State.ACTIVE:
            if trial.exp_state == State.PAUSED.value:
                conn.execute(sa.update(t.trials).where(t.trials.c.id == trial.id).values(state=State.PAUSED.value))
            elif exit_code is None or (exit_code == 0 and alloc.acked_preemption):
                self._request(conn, trial.id, config)
            elif exit_code == 0:
                self._end(conn, trial, State.COMPLETED, ends)
                if trial.early_exit:
                    why = (search.ExitedReason.INVALID_HP if "INVALID_HP" in trial.early_exit
                           else search.ExitedReason.USER_CANCELED)
                    searcher_events.append(SearcherEvent("trial_exited_early", rid, reason=why.value))
                searcher_events.append(SearcherEvent("trial_closed", rid))
            else:
                restarts = trial.restarts + 1
                conn.execute(sa.update(t.trials).where(t.trials.c.id == trial.id).values(restarts=restarts))
                if restarts > int(config.get("max_restarts", 5)):
                    self._end(conn, trial, State.ERROR, ends)
                    searcher_events.append(
                        SearcherEvent("trial_exited_early", rid, reason=search.ExitedReason.ERRORED.value))
                    searcher_events.append(SearcherEvent("trial_closed", rid))
                else:
                    self._request(conn, trial.id, config)

        def follow() -> None:
            self.flush()
            if searcher_events and self.searcher_batch is not None:
                # Exits that reach the master in one loop turn share one searcher transaction with
                # that turn's validations (group commit); the group checks the finish itself.
                self.searcher_batch.add(trial.experiment_id, searcher_events)
                self.searcher_batch.kick()
                return
            if searcher_events:
                self.experiments.searcher_events(trial.experiment_id, searcher_events)
            self.experiments.maybe_finish(trial.experiment_id)

        return follow

    def recover(self) -> None:
        """After a restart: end stopping trials, queue active ones that have no allocation
        (an unmanaged trial is never ACTIVE: its lost ones are marked by its own service)."""
        if self.experiments is not None:
            self.experiments.unmanaged.recover()
        with self._engine.begin() as conn:
            rows = conn.execute(
                sa.select(t.trials, t.experiments.c.config)
                .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
                .where(t.trials.c.state.in_([State.ACTIVE.value, *[s.value for s in STOPPING]]))
            ).all()
            for trial in rows:
                if self._open_allocation(conn, trial.id) is not None:
                    continue
                if State(trial.state) in STOPPING:
                    self._deferred.append(lambda tid=trial.id: self._finish_without_allocation(tid))
                else:
                    self._request(conn, trial.id, trial.config)
        self.flush()

    # -- small updates from the task and the user ---------------------------------------

    def _update(self, trial_id: int, **values: Any) -> None:
        with self._engine.begin() as conn:
            n = conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(**values)).rowcount
        if not n:
            raise NotFound(f"trial {trial_id} not found")

    def set_progress(self, trial_id: int, progress: float) -> None:
        self._update(trial_id, progress=progress)

    def set_early_exit(self, trial_id: int, reason: str) -> None:
        self._update(trial_id, early_exit=reason[:64])

    def set_runner_state(self, trial_id: int, state: str) -> None:
        self._update(trial_id, runner_state=state)

    def set_metadata(self, trial_id: int, metadata: dict) -> None:
        self._update(trial_id, run_metadata=metadata)

    def state(self, trial_id: int) -> str:
        with self._reader.connect() as conn:
            return conn.execute(sa.select(t.trials.c.state).where(t.trials.c.id == trial_id)).scalar_one()

    def kill_trial(self, trial_id: int) -> None:
        if self.experiments is not None and self.experiments.unmanaged.is_unmanaged_trial(trial_id):
            self.experiments.unmanaged.kill_trial(trial_id)
            return
        with self._engine.begin() as conn:
            trial = conn.execute(sa.select(t.trials).where(t.trials.c.id == trial_id)).one()
            if State(trial.state) in TERMINAL:
                return
            conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(state=State.STOPPING_KILLED.value))
            self._stop_allocation_later(conn, trial_id, graceful=False)
        self.flush()
