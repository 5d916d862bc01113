"""Experiments: creation, the user's lifecycle verbs, and the searcher loop.

Every searcher event runs in one transaction with its consequences: the new trials, the
stop decisions and the searcher's event log are committed together, so a master killed at
any point restarts with a searcher that agrees with the trials table. Several events of one
experiment may share that transaction (``searcher_events``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ... import config as expconf
from ... import names as _names
from ... import searcher as search
from ...errors import Conflict, InvalidConfig, InvalidRequest, NotFound
from ...store import experiments as store
from ...store import reader
from ...store import trials as trial_store
from ..accounts.auth import User
from ..common.clock import Clock
from ..common.late import Late
from ..common.states import STOPPING, STOPPING_END, TERMINAL, State, can_transition
from . import continuation
from ._warm_start import warm_start_checkpoint
from .preparation import MAX_EXPERIMENT_NAME, PreparedExperiment, job_values, prepare
from .searcher_log import SearcherEvent, SearcherLog
from .unmanaged import UnmanagedService

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig
    from .trials import TrialService

log = logging.getLogger("det_jupyter")


class ExperimentService:
    def __init__(
        self, engine: sa.Engine, clock: Clock, defaults: expconf.MasterDefaults, *,
        trials: Late[TrialService],
        resources: ResourceConfig | None = None,
        on_finished: Callable[[int], None] = lambda _exp_id: None,
        on_state: Callable[[sa.Connection, int, str], None] = lambda _conn, _exp_id, _state: None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        """``trials`` closes the experiments–trials cycle (bound by the composition root).
        ``on_finished`` is called with an experiment's id once it ended (checkpoint GC);
        ``on_state`` in the transaction that sets a state (webhooks)."""
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._defaults = defaults
        self._log = SearcherLog()
        self._trials = trials
        self.resources = resources
        self.on_change = on_change
        self.on_finished = on_finished
        self.on_state = on_state
        # Experiments and trials a process outside the cluster reports into (core_v2).
        self.unmanaged = UnmanagedService(engine, clock, self)

    @property
    def trials(self) -> TrialService:
        return self._trials.get()

    # -- create -------------------------------------------------------------------------

    def create(
        self,
        user: User,
        config_text: str,
        files: list[dict],
        *,
        activate: bool = True,
        project_id: int | None = None,
        validate_only: bool = False,
    ) -> tuple[sa.Row | None, dict]:
        """Validate, expand and store an experiment; start its searcher when ``activate``.
        ``prepare`` then ``store``; a caller on the event loop runs ``prepare`` in a thread."""
        prepared = self.prepare(config_text, files, validate_only=validate_only)
        if validate_only:
            return None, prepared.config
        return self.get(self.store(user, prepared, activate=activate, project_id=project_id)), prepared.config

    def prepare(self, config_text: str, files: list[dict], *, validate_only: bool = False,
                raw: dict[str, Any] | None = None, unmanaged: bool = False) -> PreparedExperiment:
        """``preparation.prepare`` with this master's defaults: safe in a thread."""
        return prepare(config_text, files, self._defaults, validate_only=validate_only, raw=raw,
                       unmanaged=unmanaged)

    def preview_search(self, raw: Any) -> dict[str, Any]:
        """``v1SearchSummary`` of a config (a mapping, as ``det preview-search`` sends it): the
        searcher section with its defaults and how many trials train how far. InvalidConfig
        names what is wrong; no entrypoint is needed (0.38.1 previews a partial config)."""
        if not isinstance(raw, dict) or not isinstance(raw.get("searcher"), dict):
            raise InvalidConfig("invalid experiment configuration; missing searcher", field="searcher")
        prepared = self.prepare("", [], validate_only=True, raw=raw, unmanaged=True)
        config = prepared.config
        try:
            plan = search.preview(config["searcher"], config["hyperparameters"])
        except ValueError as exc:
            raise InvalidConfig(f"searcher: {exc}", field="searcher") from exc
        return {"config": {k: v for k, v in config["searcher"].items() if v is not None},
                "trials": [t.to_wire() for t in plan]}

    def store(self, user: User, prepared: PreparedExperiment, *, activate: bool = True,
              project_id: int | None = None) -> int:
        """Store a prepared experiment (``prepare``, not ``validate_only``) and start its
        searcher when ``activate``; on the event loop (it writes shared state). Returns its id
        (not its row: reading back a config of megabytes costs the loop time)."""
        if prepared.searcher is None:
            raise ValueError("store needs an experiment prepared without validate_only")
        config, config_text, tgz, searcher = prepared.config, prepared.config_text, prepared.tgz, prepared.searcher
        job = job_values(config, self.resources)
        now = self._clock.now()
        with self._engine.begin() as conn:
            warm_start_checkpoint(conn, config["searcher"])  # refused here when there is none
            project = project_id if project_id is not None else 1
            if not store.project_exists(conn, project):
                raise NotFound(f"project {project} not found")
            exp_id = store.insert(
                conn,
                state=(State.ACTIVE if activate else State.PAUSED).value,
                name=config["name"],
                description=config.get("description") or "",
                labels=list(config.get("labels") or []),
                notes="",
                owner_id=user.id,
                project_id=project,
                job_id=(job_id := str(uuid.uuid4())),
                config=config,
                original_config=config_text,
                searcher_type=config["searcher"]["name"],
                searcher_state=None,
                searcher_started=False,
                searcher_shutdown=False,
                archived=False,
                progress=0.0,
                start_time=now,
            )
            store.insert_context(conn, exp_id, tgz)
            store.insert_job(conn, job_id=job_id, job_type="EXPERIMENT", owner_id=user.id,
                             queue_position=now, submitted_at=now, **job)
            self._log.put(exp_id, searcher)
            if activate:
                self._start_searcher(conn, exp_id)
            else:
                self._log.save(conn, exp_id, force=True)
        self.trials.flush()
        self.on_change()
        return exp_id

    def patch(self, user: User, exp_id: int, **fields: Any) -> None:
        """Change the experiment's name, description, notes or labels. Who may is the
        caller's check (UPDATE_EXPERIMENT_METADATA on its workspace)."""
        row = self.get(exp_id)
        values: dict[str, Any] = {}
        for key in ("description", "notes"):
            if key in fields:
                if not isinstance(fields[key], str):
                    raise InvalidRequest(f"{key} must be a string")
                values[key] = fields[key]
        if "name" in fields:  # shown on one line everywhere: no control or invisible characters
            values["name"] = fields["name"] if fields["name"] == row.name else _names.check_text(
                "experiment name", fields["name"], max_len=MAX_EXPERIMENT_NAME, empty=False)
        if "labels" in fields:
            values["labels"] = _names.check_labels(fields["labels"], stored=row.labels or ())
        if values:
            with self._engine.begin() as conn:
                store.update(conn, exp_id, **values)
            self.on_change()

    # -- reads --------------------------------------------------------------------------

    def get(self, exp_id: int) -> sa.Row:
        with self._reader.connect() as conn:
            row = store.get(conn, exp_id)
        if row is None:
            raise NotFound(f"experiment {exp_id} not found")
        return row

    def context_tgz(self, exp_id: int) -> bytes:
        with self._reader.connect() as conn:
            tgz = store.context_tgz(conn, exp_id)
        if tgz is None:
            raise NotFound(f"experiment {exp_id} has no context")
        return tgz

    # -- lifecycle verbs ----------------------------------------------------------------

    def pause(self, exp_id: int) -> None:
        exp = self.get(exp_id)
        _managed(exp, "pause")
        state = State(exp.state)
        if state == State.PAUSED:
            return
        self._require(exp_id, state, State.PAUSED, "pause")
        with self._engine.begin() as conn:
            self._set_state(conn, exp_id, State.PAUSED)
        self.trials.pause_all(exp_id)
        self.on_change()

    def activate(self, exp_id: int) -> None:
        exp = self.get(exp_id)
        _managed(exp, "activate")
        state = State(exp.state)
        if state == State.ACTIVE:
            return
        self._require(exp_id, state, State.ACTIVE, "activate")
        with self._engine.begin() as conn:
            self._set_state(conn, exp_id, State.ACTIVE)
            if not exp.searcher_started:
                self._start_searcher(conn, exp_id)
        self.trials.flush()
        self.trials.resume_all(exp_id)
        self.on_change()

    def continue_search(self, exp_id: int, config: dict[str, Any]) -> None:
        """0.38.1's ``ContinueExperiment`` once the override is merged and checked (``config``,
        expanded: ``continuation.merge_override`` then ``prepare``): a finished experiment
        takes ``config`` and goes back to ACTIVE, its unfinished trials (a single searcher's
        trial always) resuming from their latest checkpoints with their restarts zeroed.
        Conflict when it is not over, or is a search that completed every trial."""
        exp = self.get(exp_id)
        _managed(exp, "continue")
        try:
            plan = self._continue_in_db(exp_id, config)
        except Exception:
            self._log.forget(exp_id)  # the searcher it put may be ahead of the rolled-back DB
            self.trials.forget_config(exp_id)
            raise
        self.trials.flush()
        self.activate(exp_id)
        if plan.shutdown:
            self.maybe_finish(exp_id)

    def _continue_in_db(self, exp_id: int, config: dict[str, Any]) -> continuation.Resumption:
        """``continue_search``'s checks and writes, in one transaction; the plan it carried out."""
        with self._engine.begin() as conn:
            state = State(store.state(conn, exp_id))
            if state not in TERMINAL:
                raise Conflict(continuation.not_terminal_message(state.value))
            trials = {t.request_id: t for t in trial_store.of_experiment_not_in(conn, exp_id, [])}
            single = config["searcher"]["name"] == "single"
            if state == State.COMPLETED and not single and all(
                    t.state == State.COMPLETED.value for t in trials.values()):
                raise Conflict(continuation.HP_SEARCH_COMPLETED)
            plan = continuation.resume_search(config, {rid: t.state for rid, t in trials.items()})
            # PAUSED first, as 0.38.1 does, then activated below like any paused experiment.
            store.update(conn, exp_id, config=config, state=State.PAUSED.value, progress=0.0, end_time=None,
                         searcher_started=True, searcher_shutdown=plan.shutdown)
            self.trials.forget_config(exp_id)
            self.trials.rerun(conn, [trials[rid].id for rid in plan.rerun])
            paused: Any = SimpleNamespace(id=exp_id, state=State.PAUSED.value, config=config)
            for action in plan.create:
                self.trials.create(conn, paused, action)
            self._log.put(exp_id, plan.searcher)
            self._log.save(conn, exp_id, force=True)  # its past is now the snapshot
        return plan

    def cancel(self, exp_id: int) -> None:
        self._stop(exp_id, State.STOPPING_CANCELED, graceful=True)

    def kill(self, exp_id: int) -> None:
        self._stop(exp_id, State.STOPPING_KILLED, graceful=False)

    def _stop(self, exp_id: int, target: State, *, graceful: bool) -> None:
        exp = self.get(exp_id)
        state = State(exp.state)
        if state in TERMINAL or state == target:
            return
        if exp.unmanaged:
            self.unmanaged.stop_experiment(exp_id)
            return
        if state == State.STOPPING_CANCELED and target == State.STOPPING_KILLED:
            pass  # kill escalates a cancel
        else:
            self._require(exp_id, state, target, "kill" if not graceful else "cancel")
        with self._engine.begin() as conn:
            self._set_state(conn, exp_id, target)
        self.trials.stop_all(exp_id, target, graceful=graceful)
        self.maybe_finish(exp_id)
        self.on_change()

    def _require(self, exp_id: int, src: State, dst: State, verb: str) -> None:
        if not can_transition(src, dst):
            raise Conflict(f"cannot {verb} experiment {exp_id}: it is {src.value}")

    def _set_state(self, conn: sa.Connection, exp_id: int, state: State, error: str | None = None) -> None:
        values: dict[str, Any] = {"state": state.value}
        if state in TERMINAL:
            values["end_time"] = self._clock.now()
        if error is not None:
            values["error_message"] = error
        store.update(conn, exp_id, **values)
        self.on_state(conn, exp_id, state.value)

    # -- searcher events ----------------------------------------------------------------

    def _start_searcher(self, conn: sa.Connection, exp_id: int) -> None:
        store.update(conn, exp_id, searcher_started=True)
        self._feed(conn, {exp_id: [SearcherEvent("start")]})

    def searcher_event(self, exp_id: int, event: SearcherEvent) -> None:
        """Feed one event to the experiment's searcher and apply what it decides, atomically."""
        self.searcher_events(exp_id, [event])

    def searcher_events(self, exp_id: int, events: list[SearcherEvent]) -> None:
        """Feed events to the experiment's searcher, in order, and apply what it decides in ONE
        transaction (a group commit: one commit's wait instead of one per event).

        Each event sees the effects of those before it, so the decisions and rows are those of
        feeding them one by one, except that the effects deferred past the commit (preempting
        a stopped trial, or closing it at once when nothing of it runs, which feeds its
        trial_closed) follow the whole group, and the snapshot is rewritten at most once per
        group. If the group fails it rolls back and each event is retried alone:
        a bad event then ends as it would have alone (a searcher error fails the experiment,
        anything else is raised after the others were fed) and costs the others nothing.
        """
        if not events:
            return
        shutdown = True
        try:
            with self._engine.begin() as conn:
                shutdown = self._feed(conn, {exp_id: events})[exp_id]
        except Exception as exc:
            self._log.forget(exp_id)  # its in-memory state may be ahead of the rolled-back DB
            self.trials.discard_deferred()
            if len(events) > 1:
                self._one_by_one(exp_id, events)
                return
            if not isinstance(exc, search.SearcherError):
                raise
            self.fail(exp_id, f"searcher error: {exc}")
        self.trials.flush()
        if _may_end(shutdown, events):
            self.maybe_finish(exp_id)

    def searcher_events_many(self, groups: dict[int, list[SearcherEvent]]) -> None:
        """``searcher_events`` for several experiments' groups in ONE transaction (a loop
        turn's exits and validations, whatever their experiments). Should it fail, it rolls
        back and each experiment's group is fed alone (as ``searcher_events``, with its own
        fallback), so one bad experiment costs the others nothing; the first error is raised
        once every group was fed."""
        if len(groups) == 1:
            [(exp_id, events)] = groups.items()
            self.searcher_events(exp_id, events)
            return
        try:
            with self._engine.begin() as conn:
                states = store.states(conn, list(groups))
                shutdown = self._feed(conn, groups, states)
        except Exception:
            for exp_id in groups:
                self._log.forget(exp_id)  # their in-memory states may be ahead of the database
            self.trials.discard_deferred()
            self._each_alone(groups)
            return
        self.trials.flush()
        self.maybe_finish_many([exp_id for exp_id, events in groups.items()
                                if _may_end(shutdown.get(exp_id, False), events)])

    def _each_alone(self, groups: dict[int, list[SearcherEvent]]) -> None:
        """Feed each experiment's group in a transaction of its own; raise the first error
        once all were fed."""
        first: Exception | None = None
        for exp_id, events in groups.items():
            try:
                self.searcher_events(exp_id, events)
            except Exception as exc:
                if first is not None:
                    log.exception("searcher events of experiment %s failed", exp_id)
                first = first or exc
        if first is not None:
            raise first

    def _one_by_one(self, exp_id: int, events: list[SearcherEvent]) -> None:
        """Retry a failed group event by event; raise the first error once all were tried."""
        first: Exception | None = None
        for event in events:
            try:
                self.searcher_events(exp_id, [event])
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    def _feed(self, conn: sa.Connection, groups: dict[int, list[SearcherEvent]],
              states: dict[int, str] | None = None) -> dict[int, bool]:
        """Feed each experiment's events (``_apply``), then save every searcher's log in one
        statement (a snapshot instead where it shut down or one is due); whether each shut
        down. ``states``: the experiments', if the caller read them in this transaction."""
        shutdown = {exp_id: self._apply(conn, exp_id, events, (states or {}).get(exp_id))
                    for exp_id, events in groups.items() if events}
        self._log.save_many(conn, list(shutdown.items()))
        return shutdown

    def _apply(self, conn: sa.Connection, exp_id: int, events: list[SearcherEvent],
               state: str | None = None) -> bool:
        """Feed events and carry out their actions (and those of the trial_created events they
        cause); returns whether the searcher shut down (the caller saves the log: ``_feed``).
        ``state``: the experiment's, if the caller read it in this transaction."""
        exp = self._exp_row(conn, exp_id, state)
        shutdown = False
        for event in events:
            if self._carry_out(conn, exp, self._log.feed(conn, exp_id, event)):
                shutdown = True
                exp = self._exp_row(conn, exp_id)  # a failed search's Shutdown changed its state
        if shutdown:
            store.update(conn, exp_id, searcher_shutdown=True)
        return shutdown

    def _exp_row(self, conn: sa.Connection, exp_id: int, state: str | None = None) -> Any:
        """The experiment's id and state (read now unless given), and its config (from the
        trials' cache: read and parsed once per master run, not in every searcher
        transaction)."""
        if state is None:
            state = store.state(conn, exp_id)
        return SimpleNamespace(id=exp_id, state=state, config=self.trials.experiment_config(conn, exp_id))

    def _carry_out(self, conn: sa.Connection, exp: Any, actions: list) -> bool:
        shutdown = False
        for action in actions:
            if isinstance(action, search.Create):
                if State(exp.state) not in (State.ACTIVE, State.PAUSED):
                    continue
                self.trials.create(conn, exp, action)
                created = SearcherEvent("trial_created", action.request_id)
                shutdown |= self._carry_out(conn, exp, self._log.feed(conn, exp.id, created))
            elif isinstance(action, search.Stop):
                self.trials.searcher_stop(conn, exp.id, action.request_id)
            elif isinstance(action, search.Shutdown):
                shutdown = True
                if action.failure:
                    self._set_state(conn, exp.id, State.STOPPING_ERROR, "the searcher failed")
                elif action.cancel:
                    self._set_state(conn, exp.id, State.STOPPING_CANCELED, "its only trial was canceled")
        return shutdown

    # -- completion ---------------------------------------------------------------------

    def fail(self, exp_id: int, message: str) -> None:
        exp = self.get(exp_id)
        if State(exp.state) in TERMINAL:
            return
        with self._engine.begin() as conn:
            self._set_state(conn, exp_id, State.STOPPING_ERROR, message)
        self.trials.stop_all(exp_id, State.STOPPING_ERROR, graceful=False)
        self.maybe_finish(exp_id)

    def maybe_finish(self, exp_id: int) -> None:
        """Move the experiment to its terminal state once no trial can run any more."""
        self.maybe_finish_many([exp_id])

    def maybe_finish_many(self, exp_ids: list[int]) -> None:
        """``maybe_finish`` for several experiments. Called after every loop turn's exits: one
        autocommit read answers "not yet" for all of them (nearly always) without the round
        trips of a transaction; each that may end asks again in a transaction of its own."""
        if not exp_ids:
            return
        with self._reader.connect() as conn:
            ending = [exp_id for exp_id, end in self._end_states(conn, exp_ids).items() if end is not None]
        for exp_id in ending:
            with self._engine.begin() as conn:
                end = self._end_states(conn, [exp_id]).get(exp_id)
                if end is None:
                    continue
                target, search_done = end
                self._set_state(conn, exp_id, target)
                if search_done:
                    store.update(conn, exp_id, progress=1.0)
            self._log.forget(exp_id)
            self.on_finished(exp_id)
            self.on_change()

    def _end_states(self, conn: sa.Connection, exp_ids: list[int]) -> dict[int, tuple[State, bool] | None]:
        """Per experiment: the state it ends in now, and whether its search ending is why;
        None while a trial can still run, or when it is paused or already over."""
        rows = store.end_facts(conn, exp_ids, ended=[s.value for s in TERMINAL],
                               stopping=[s.value for s in STOPPING])
        return {row.id: _end_of(row) for row in rows}

    def active_ids(self) -> list[int]:
        with self._reader.connect() as conn:
            return store.ids_not_in(conn, [s.value for s in TERMINAL])


def _managed(exp: Any, verb: str) -> None:
    """Refuse a verb that would start or stop a search on an unmanaged experiment: its trials
    run where its script runs, and activating it would ask allocations for them."""
    if exp.unmanaged:
        raise Conflict(f"cannot {verb} experiment {exp.id}: it is unmanaged (its trials run outside the "
                       "cluster, in the process that reports them); cancel or kill it to end it")


def _may_end(shutdown: bool, events: list[SearcherEvent]) -> bool:
    """Whether feeding ``events`` may have ended the experiment: a validation can only through
    a searcher shutdown; a trial closing always may. Skipping the check otherwise keeps the
    per-report cost down."""
    return shutdown or any(e.kind != "validation_completed" for e in events)


def _end_of(row: Any) -> tuple[State, bool] | None:
    """What ``_end_states`` decides from one experiment's row."""
    if row.live:
        return None
    state = State(row.state)
    if state in STOPPING:
        return STOPPING_END[state], False
    if state in TERMINAL or state == State.PAUSED or not row.searcher_shutdown:
        return None
    return State.COMPLETED, True
