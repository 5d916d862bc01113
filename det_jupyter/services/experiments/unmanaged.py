"""Unmanaged experiments and trials (0.38.1's ``core_v2``): a script or notebook with no cluster
task creates them, reports metrics and checkpoints into them, and says itself when its trial
runs and ends. The master never schedules them: no searcher runs, no allocation is asked for.

States are 0.38.1's. An experiment is created PAUSED; a trial is PAUSED until its process
starts it (``start_trial``: RUNNING, with a new run id), and ends in the state its process
patches in (COMPLETED, or ERROR when it raised). Starting it again (a second ``core_v2.init``
with the same external ids) continues it from its latest checkpoint. The experiment follows
its trials (``rolled_up_state``). A RUNNING trial whose process sent no heartbeat for
``LOST_AFTER_S`` ends in ERROR (``mark_lost``, swept every ``SWEEP_S`` while any runs).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import experiments as exp_store
from ...store import reader
from ...store import trials as trial_store
from ...store import unmanaged as store
from ..accounts.auth import User
from ..common.states import TERMINAL, State
from ..metrics.service import recompute_summary

log = logging.getLogger("det_jupyter")

#: 0.38.1's order (``UpdateUnmanagedExperimentStatesTx``): an experiment takes the state of its
#: most advanced trial. CANCELED is ours (0.38.1 skips it): when every trial was canceled, the
#: experiment is too.
_RANK = {State.CANCELED: 5, State.PAUSED: 10, State.ERROR: 20, State.COMPLETED: 30, State.RUNNING: 40}

#: The states a trial's process may set (``PATCH /api/v1/trials/{id}``), by their wire names.
#: ACTIVE is read as RUNNING: an unmanaged trial is never ACTIVE, which would ask for an
#: allocation after a master restart.
PATCHABLE = {"STATE_RUNNING": State.RUNNING, "STATE_ACTIVE": State.RUNNING, "STATE_PAUSED": State.PAUSED,
             "STATE_COMPLETED": State.COMPLETED, "STATE_ERROR": State.ERROR, "STATE_CANCELED": State.CANCELED}


def rolled_up_state(trial_states: Iterable[str]) -> State | None:
    """The state an unmanaged experiment takes from its trials' (None: no trial says)."""
    ranked = [State(s) for s in trial_states if s in _RANK]
    return max(ranked, key=_RANK.__getitem__) if ranked else None


def patched_state(wire: str) -> State:
    """The stored state for a PATCH's ``state``, or InvalidRequest naming the field."""
    state = PATCHABLE.get(wire)
    if state is None:
        raise InvalidRequest(f"state: an unmanaged trial's process may set {', '.join(PATCHABLE)}; "
                             f"got {wire[:40]!r}")
    return state


@dataclass(frozen=True)
class StartedRun:
    """``v1StartTrialResponse``: the run's id, and where it resumes (the latest checkpoint)."""

    run_id: int
    steps_completed: int
    latest_checkpoint: str | None


class UnmanagedService:
    LOST_AFTER_S = 300.0  # 0.38.1's MarkLostTrials: five minutes without a heartbeat
    SWEEP_S = 60.0  # the stock client sends a heartbeat every 60 s

    def __init__(self, engine: sa.Engine, clock: Any, experiments: Any) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._experiments = experiments  # ExperimentService: its hooks and the trials' config cache
        # Trials started again in this master's life: the run whose reports archive what the
        # earlier runs reported from the same step on (0.38.1's rollbackMetrics).
        self._rewinding: dict[int, int] = {}
        self._sweep: asyncio.TimerHandle | None = None

    # -- experiments --------------------------------------------------------------------

    def create_experiment(self, user: User, prepared: Any, project_id: int | None, *,
                          external_id: str | None = None) -> int:
        """Store an unmanaged experiment (``ExperimentService.prepare(..., unmanaged=True)``),
        PAUSED, with no searcher and no job. Raises IntegrityError when ``external_id`` is
        taken (``put_experiment`` handles it)."""
        config = prepared.config
        project = project_id if project_id is not None else 1
        with self._engine.begin() as conn:
            if not exp_store.project_exists(conn, project):
                raise NotFound(f"project {project} not found")
            exp_id = exp_store.insert(
                conn,
                state=State.PAUSED.value, name=config["name"], description=config.get("description") or "",
                labels=list(config.get("labels") or []), notes="", owner_id=user.id, project_id=project,
                job_id=str(uuid.uuid4()), config=config, original_config=prepared.config_text,
                searcher_type=config["searcher"]["name"], searcher_state=None, searcher_started=False,
                searcher_shutdown=False, archived=False, progress=0.0, start_time=self._clock.now(),
                unmanaged=True, external_experiment_id=external_id,
            )
            exp_store.insert_context(conn, exp_id, prepared.tgz)
        self._experiments.on_change()
        return exp_id

    def by_external_id(self, external_id: str) -> int | None:
        with self._reader.connect() as conn:
            return store.experiment_by_external_id(conn, external_id)

    def put_experiment(self, user: User, prepared: Any, project_id: int | None,
                       external_id: str) -> tuple[int, bool]:
        """The experiment named ``external_id``, created if there is none; whether it was."""
        found = self.by_external_id(external_id)
        if found is not None:
            return found, False
        try:
            return self.create_experiment(user, prepared, project_id, external_id=external_id), True
        except sa.exc.IntegrityError:
            found = self.by_external_id(external_id)  # another request created it meanwhile
            if found is None:
                raise
            return found, False

    def update_config(self, exp_id: int, prepared: Any) -> None:
        """A second put of the same external id: its config (and name) replace the stored
        ones, as 0.38.1's upsert does; trials, metrics and checkpoints stay."""
        config = prepared.config
        with self._engine.begin() as conn:
            exp_store.update(conn, exp_id, config=config, original_config=prepared.config_text, name=config["name"])
        self._experiments.trials.forget_configs()
        self._experiments.on_change()

    def stop_experiment(self, exp_id: int) -> None:
        """Cancel or kill (0.38.1 ignores both here): nothing of it runs on the cluster, so its
        open trials and it end CANCELED at once. A later start of a trial runs it again."""
        now = self._clock.now()
        with self._engine.begin() as conn:
            store.end_open_trials(conn, exp_id, State.CANCELED.value, now, sorted(s.value for s in TERMINAL))
            exp_store.update(conn, exp_id, state=State.CANCELED.value, end_time=now)
            self._experiments.on_state(conn, exp_id, State.CANCELED.value)
        self._experiments.on_change()

    # -- trials -------------------------------------------------------------------------

    def create_trial(self, exp_id: int, hparams: dict[str, Any], external_id: str | None = None) -> int:
        """A PAUSED trial of the unmanaged experiment; with ``external_id``, the trial of that
        id if there is one (its hyperparameters replaced, as 0.38.1's upsert does)."""
        try:
            return self._create_trial(exp_id, hparams, external_id)
        except sa.exc.IntegrityError:
            if external_id is None:
                raise
            return self._create_trial(exp_id, hparams, external_id)  # another request made it

    def _create_trial(self, exp_id: int, hparams: dict[str, Any], external_id: str | None) -> int:
        with self._engine.begin() as conn:
            unmanaged = store.experiment_is_unmanaged(conn, exp_id)
            if unmanaged is None:
                raise NotFound(f"experiment {exp_id} not found")
            if not unmanaged:
                raise InvalidRequest(f"experimentId: experiment {exp_id} runs on the cluster (its searcher makes its "
                                     "trials); trials are created only in unmanaged experiments")
            if external_id is not None:
                found = store.trial_by_external_id(conn, exp_id, external_id)
                if found is not None:
                    trial_store.update(conn, found, hparams=hparams)
                    return found
            key = uuid.uuid4().hex
            trial_id = trial_store.insert(
                conn,
                experiment_id=exp_id, request_id=key, task_id=f"{exp_id}.{key}", state=State.PAUSED.value,
                hparams=hparams, seed=0, restarts=0, run_id=0, total_batches=0, searcher_stopped=False,
                start_time=self._clock.now(), external_trial_id=external_id,
            )
        self._experiments.on_change()
        return trial_id

    def _unmanaged_trial(self, conn: sa.Connection, trial_id: int) -> Any:
        row = store.trial_with_kind(conn, trial_id)
        if row is None:
            raise NotFound(f"trial {trial_id} not found")
        if not row.unmanaged:
            raise InvalidRequest(f"trialId: trial {trial_id} runs on the cluster, which sets its state; only an "
                                 "unmanaged trial is started and patched by its own process")
        return row

    def start_trial(self, trial_id: int, *, resume: bool) -> StartedRun:
        """A new run of the trial (RUNNING); where it resumes: its latest completed checkpoint,
        from its second run on. Without ``resume`` only a trial never started may start."""
        with self._engine.begin() as conn:
            trial = self._unmanaged_trial(conn, trial_id)
            if not resume and trial.run_id:
                raise Conflict(f"trial {trial_id} has already been started (run {trial.run_id}); "
                               "send resume: true to continue it")
            run_id = trial.run_id + 1
            trial_store.update(conn, trial_id, run_id=run_id, state=State.RUNNING.value,
                               last_activity=self._clock.now(), end_time=None)
            latest = None
            if run_id > 1:
                latest = store.latest_completed(conn, trial_id)
            self._roll_up(conn, trial.experiment_id)
        if run_id > 1:
            self._rewinding[trial_id] = run_id
        self._sweep_soon()
        self._experiments.on_change()
        return StartedRun(run_id, latest.steps_completed if latest else 0, latest.uuid if latest else None)

    def patch_trial(self, trial_id: int, state: State | None) -> None:
        """A heartbeat (no state) or the trial's process setting its state."""
        now = self._clock.now()
        with self._engine.begin() as conn:
            trial = self._unmanaged_trial(conn, trial_id)
            values: dict[str, Any] = {"last_activity": now}
            if state is not None:
                values.update(state=state.value, end_time=now if state in TERMINAL else None)
            trial_store.update(conn, trial_id, **values)
            if state is not None:
                self._roll_up(conn, trial.experiment_id)
        if state is not None:
            if state in TERMINAL:
                self._rewinding.pop(trial_id, None)
            else:
                self._sweep_soon()
            self._experiments.on_change()

    def kill_trial(self, trial_id: int) -> None:
        """``det t kill`` of an unmanaged trial: unless over, it ends CANCELED (its process is
        not ours to stop; its next start continues it)."""
        with self._reader.connect() as conn:
            state = store.trial_state(conn, trial_id)
        if state is not None and State(state) not in TERMINAL:
            self.patch_trial(trial_id, State.CANCELED)

    def is_unmanaged_trial(self, trial_id: int) -> bool:
        with self._reader.connect() as conn:
            return store.trial_is_unmanaged(conn, trial_id)

    def trial_of_task(self, task_id: str) -> tuple[int, bool]:
        """The trial whose task ``task_id`` is, and whether it is unmanaged; NotFound if none."""
        with self._reader.connect() as conn:
            row = store.trial_of_task(conn, task_id)
        if row is None:
            raise NotFound(f"task {task_id} not found")
        return row.id, bool(row.unmanaged)

    # -- metrics of a continued trial ---------------------------------------------------

    def rewind_for(self, trial_id: int, run_id: int | None, group: str, steps: int) -> None:
        """Before a report of a continued trial's run: archive what its earlier runs reported
        at or past this step (0.38.1's rollbackMetrics: past it in other groups, from it in
        the report's own), so the new run's reports replace them. A no-op for every other
        trial (one dictionary lookup)."""
        if run_id is None or self._rewinding.get(trial_id) != run_id:
            return
        with self._engine.begin() as conn:
            if not store.archive_earlier_runs(conn, trial_id, run_id, group, steps):
                return
            exp_id = store.experiment_of_trial(conn, trial_id)
            recompute_summary(conn, trial_id, self._experiments.trials.experiment_config(conn, exp_id))
            # No visible report lies past total_batches (metrics.ingest relies on it): lower it to theirs.
            last = store.last_visible_step(conn, trial_id)
            trial_store.update(conn, trial_id, total_batches=last or 0)

    # -- the experiment follows its trials ----------------------------------------------

    def _roll_up(self, conn: sa.Connection, exp_id: int) -> None:
        rows = store.states_of_experiment(conn, exp_id)
        target = rolled_up_state(r.state for r in rows)
        current = exp_store.state(conn, exp_id)
        if target is None or target.value == current:
            return
        values: dict[str, Any] = {"state": target.value}
        if target in TERMINAL:
            values["end_time"] = max((r.end_time for r in rows if r.end_time is not None),
                                     default=self._clock.now())
            if target == State.COMPLETED:
                values["progress"] = 1.0
        else:
            values.update(end_time=None, progress=0.0)
        exp_store.update(conn, exp_id, **values)
        self._experiments.on_state(conn, exp_id, target.value)

    # -- trials whose process went away -------------------------------------------------

    def mark_lost(self) -> list[int]:
        """End in ERROR the RUNNING unmanaged trials whose last heartbeat is older than
        ``LOST_AFTER_S`` (their end time: that heartbeat); their ids."""
        cutoff = self._clock.now() - self.LOST_AFTER_S
        with self._engine.begin() as conn:
            lost = store.silent_since(conn, cutoff, State.RUNNING.value)
            for row in lost:
                trial_store.update(conn, row.id, state=State.ERROR.value, end_time=row.last_activity or cutoff)
            for exp_id in sorted({row.experiment_id for row in lost}):
                self._roll_up(conn, exp_id)
        if lost:
            log.warning("unmanaged trials %s sent no heartbeat for %.0f s: marked ERROR",
                        ", ".join(str(r.id) for r in lost), self.LOST_AFTER_S)
            self._experiments.on_change()
        return [row.id for row in lost]

    def _any_running(self) -> bool:
        with self._reader.connect() as conn:
            return store.any_in_state(conn, State.RUNNING.value)

    def recover(self) -> None:
        """After a restart: mark the trials lost meanwhile; keep sweeping while any runs."""
        self.mark_lost()
        if self._any_running():
            self._sweep_soon()

    def _sweep_soon(self) -> None:
        if self._sweep is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a script using the services): nothing sweeps
        self._sweep = loop.call_later(self.SWEEP_S, self._swept)

    def _swept(self) -> None:
        self._sweep = None
        try:
            self.mark_lost()
            running = self._any_running()
        except Exception:  # noqa: BLE001 - a loop callback: log, and try again later
            log.exception("sweeping lost unmanaged trials failed")
            running = True
        if running:
            self._sweep_soon()

    def stop(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
