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
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ... import config as expconf
from ... import searcher as search
from ...errors import NotFound
from ...store import experiments as exp_store
from ...store import reader
from ...store import trials as store
from ..allocation.service import AllocationService, Gang
from ..allocation.spec import TrialRun, build_trial_spec
from ..common.clock import Clock
from ..common.identity import MasterIdentity
from ..common.states import STOPPING, STOPPING_END, TERMINAL, AllocState, State
from ..metrics.service import recompute_summary
from ._warm_start import warm_start_checkpoint
from .searcher_log import SearcherEvent

DEFAULT_PRIORITY = 42
# The states the searcher's stop leaves a trial in: already stopping, or over.
_NOT_STOPPABLE = sorted(s.value for s in TERMINAL | STOPPING)

if TYPE_CHECKING:
    from det_agent.wire import TaskSpec

    from ...config.resources import ResourceConfig
    from ..allocation.logs import LogService
    from .searcher_batch import SearcherBatcher
    from .service import ExperimentService


class TrialService:
    def __init__(
        self, engine: sa.Engine, clock: Clock, allocations: AllocationService, identity: MasterIdentity, *,
        experiments: ExperimentService | None = None,
        searcher_batch: SearcherBatcher | None = None,
        resources: ResourceConfig | None = None,
        logs: LogService | None = None,
        on_trial_end: Callable[[int], None] = lambda _exp_id: None,
    ) -> None:
        """``searcher_batch``: where trial exits' searcher events join other trials' (without
        one, each is fed at once); ``on_trial_end``: called with the experiment's id after a
        trial's end commits (checkpoint GC); ``logs``: where a run ended by a master restart
        is said."""
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._allocs = allocations
        self._identity = identity
        self._deferred: list[Callable[[], None]] = []
        self._context_digests: dict[int, str | None] = {}
        self._configs: dict[int, tuple[dict, str]] = {}
        self.experiments = experiments
        self.searcher_batch = searcher_batch
        self.resources = resources
        self._logs = logs
        self.on_trial_end = on_trial_end

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
        trial_id = store.insert(
            conn,
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
        if exp.state != State.PAUSED.value:
            self._request(conn, trial_id, exp.config, first=True)
        return trial_id

    def _request(self, conn: sa.Connection, trial_id: int, config: dict, *, first: bool = False) -> None:
        """Ask for the trial's next allocation (``first``: a trial just created, which has none)."""
        row = store.request_info(conn, trial_id)
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
            # environment.image: its containers need an agent with a Docker engine
            requires=frozenset({"docker"}) if expconf.container_for(config, "cpu") else frozenset(),
        )
        self._deferred.append(self._allocs.schedule_soon)

    # -- stopping -----------------------------------------------------------------------

    def _open_allocation(self, conn: sa.Connection, trial_id: int) -> str | None:
        return store.open_allocation(conn, trial_id, AllocState.TERMINATED.value)

    def searcher_stop(self, conn: sa.Connection, exp_id: int, request_id: str) -> None:
        """The searcher is done with this trial: ask it to stop at its next check (unless it
        is stopping or over already)."""
        trial_id = store.searcher_stop(conn, exp_id, request_id, state_=State.STOPPING_COMPLETED.value,
                                       unless=_NOT_STOPPABLE)
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
            trial = store.get(conn, trial_id)
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
            for trial in store.of_experiment_in_state(conn, exp_id, State.ACTIVE.value):
                store.update(conn, trial.id, state=State.PAUSED.value)
                alloc_id = self._open_allocation(conn, trial.id)
                if alloc_id is not None:
                    self._deferred.append(lambda a=alloc_id: self._allocs.preempt(a, timeout))
        self.flush()

    def resume_all(self, exp_id: int) -> None:
        with self._engine.begin() as conn:
            config = self.experiment_config(conn, exp_id)
            for trial in store.of_experiment_in_state(conn, exp_id, State.PAUSED.value):
                store.update(conn, trial.id, state=State.ACTIVE.value)
                if self._open_allocation(conn, trial.id) is None:
                    self._request(conn, trial.id, config)
        self.flush()

    def rerun(self, conn: sa.Connection, trial_ids: Sequence[int]) -> None:
        """Make finished trials of a continued experiment (``ExperimentService.continue_search``)
        PAUSED again, their restarts zeroed, as 0.38.1 does: the experiment's activation
        resumes them from their latest checkpoints."""
        for trial_id in trial_ids:
            store.update(conn, trial_id, state=State.PAUSED.value, restarts=0, end_time=None,
                         searcher_stopped=False, early_exit=None)

    def forget_config(self, exp_id: int) -> None:
        """Drop the cached config of an experiment whose config changed (continued)."""
        self._configs.pop(exp_id, None)

    def stop_all(self, exp_id: int, target: State, *, graceful: bool) -> None:
        with self._engine.begin() as conn:
            for trial in store.of_experiment_not_in(conn, exp_id, [s.value for s in TERMINAL]):
                if State(trial.state) == State.STOPPING_COMPLETED and target == State.STOPPING_CANCELED:
                    continue  # already on its way out
                store.update(conn, trial.id, state=target.value)
                self._stop_allocation_later(conn, trial.id, graceful=graceful)
        self.flush()

    def _end(self, conn: sa.Connection, trial: Any, state: State, ends: list[dict] | None = None) -> None:
        """End the trial (its row) in ``state``: now, or added to ``ends`` for the caller to
        write."""
        params = {"trial_id": trial.id, "state": state.value, "end_time": self._clock.now()}
        if ends is None:
            store.end(conn, params)
        else:
            ends.append(params)
        exp_id = trial.experiment_id
        self._deferred.append(lambda: self.on_trial_end(exp_id))

    # -- running ------------------------------------------------------------------------

    def build_specs_many(
        self, runs: Sequence[tuple[Any, Gang, str]], conn: sa.Connection
    ) -> dict[str, list[TaskSpec]]:
        """Start new runs of a pass's trials, in ``conn`` (the placements' transaction): rewind
        metrics past each one's checkpoint, build one spec per container of its gang; the specs
        by allocation id. One read of the trials and one write of their new runs
        (executemany), whatever the pass's size."""
        if not runs:
            return {}
        trials = {r.id: r for r in store.run_facts(conn, [a.trial_id for a, _, _ in runs])}
        starts, out = [], {}
        for alloc, gang, token in runs:
            trial = trials[alloc.trial_id]
            exp_id, owner = trial.experiment_id, trial.username
            self.experiment_config(conn, exp_id)  # the TrialRun below reads it from the cache
            ckpt_steps = 0
            if trial.latest_checkpoint:
                ckpt_steps = store.checkpoint_steps(conn, trial.latest_checkpoint) or 0
            run_id = trial.run_id + 1
            if trial.run_id:  # a first run has nothing to rewind
                # Whatever an earlier run reported past the checkpoint will be reported again.
                store.archive_reports_after(conn, trial.id, ckpt_steps)
                recompute_summary(conn, trial.id, self.experiment_config(conn, exp_id))
            starts.append({"trial_id": trial.id, "run_id": run_id, "steps": ckpt_steps})
            # (The allocation's run id was set with its placement: see allocations' ASSIGN.)
            digest = self._context_digest(conn, exp_id)
            config, config_json = self._configs[exp_id]
            run = TrialRun(
                allocation_id=alloc.allocation_id, task_id=trial.task_id, trial_id=trial.id,
                experiment_id=exp_id, run_id=run_id, seed=trial.seed, hparams=trial.hparams,
                latest_checkpoint=trial.latest_checkpoint, steps=ckpt_steps, config=config,
                config_json=config_json, owner=owner, context_digest=digest,
            )
            out[alloc.allocation_id] = [build_trial_spec(run, gang, rank, token, self._identity)
                                        for rank in range(len(gang.containers))]
        if starts:
            store.start_runs(conn, starts)
        return out

    def experiment_config(self, conn: sa.Connection, exp_id: int) -> dict:
        """The experiment's expanded config, read once per master run with its JSON text
        (every run of every trial gets it as DET_EXPERIMENT_CONFIG)."""
        cached = self._configs.get(exp_id)
        if cached is None:
            config = exp_store.config(conn, exp_id)
            cached = self._configs[exp_id] = (config, json.dumps(config))
        return cached[0]

    def forget_configs(self) -> None:
        """Configs were edited (a job's resources are mirrored into its experiment's config)."""
        self._configs.clear()

    def _context_digest(self, conn: sa.Connection, exp_id: int) -> str | None:
        """``sha256:<hex>`` of the experiment's context archive (immutable, so hashed once per
        master run): agents keep extracted contexts by it and download each one once."""
        if exp_id not in self._context_digests:
            tgz = exp_store.context_tgz(conn, exp_id)
            self._context_digests[exp_id] = f"sha256:{hashlib.sha256(tgz).hexdigest()}" if tgz else None
        return self._context_digests[exp_id]

    def allocations_exited(
        self, ended: Sequence[tuple[Any, int | None, str | None]], conn: sa.Connection
    ) -> list[Callable[[], None] | None]:
        """Decide what a turn's exits mean for their trials (restart, completion, error),
        written in ``conn`` (the allocations' own end); what must follow the commit, in order.
        One read of the trials and one write of those that ended (executemany)."""
        ids = [a.trial_id for a, _, _ in ended if a.trial_id is not None]
        trials = {r.id: r for r in store.run_facts(conn, ids)} if ids else {}
        ends: list[dict] = []
        follows = [None if alloc.trial_id is None else
                   self._exited(alloc, exit_code, reason, conn, trials[alloc.trial_id], ends)
                   for alloc, exit_code, reason in ended]
        if ends:
            store.end(conn, ends)
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
                store.update(conn, trial.id, state=State.PAUSED.value)
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
                store.update(conn, trial.id, restarts=restarts)
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

    def ended_by_restart(self, alloc: Any) -> None:
        """Say in the trial's logs that its run ended with the last master process; the trial
        resumes from its latest checkpoint (``recover``)."""
        if self._logs is not None and alloc.task_id:
            self._logs.append_system(
                task_id=alloc.task_id, allocation_id=alloc.allocation_id, trial_id=alloc.trial_id,
                message="the master restarted; this run ended and the trial resumes from its latest checkpoint",
                level="WARNING",
            )

    def recover(self) -> None:
        """After a restart: end stopping trials, queue active ones that have no allocation
        (an unmanaged trial is never ACTIVE: its lost ones are marked by its own service)."""
        if self.experiments is not None:
            self.experiments.unmanaged.recover()
        with self._engine.begin() as conn:
            for trial in store.in_states_with_config(conn, [State.ACTIVE.value, *[s.value for s in STOPPING]]):
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
            n = store.update(conn, trial_id, **values)
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
            return store.state(conn, trial_id)

    def kill_trial(self, trial_id: int) -> None:
        if self.experiments is not None and self.experiments.unmanaged.is_unmanaged_trial(trial_id):
            self.experiments.unmanaged.kill_trial(trial_id)
            return
        with self._engine.begin() as conn:
            trial = store.get(conn, trial_id)
            if State(trial.state) in TERMINAL:
                return
            store.update(conn, trial_id, state=State.STOPPING_KILLED.value)
            self._stop_allocation_later(conn, trial_id, graceful=False)
        self.flush()
