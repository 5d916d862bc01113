"""Read models for the API: experiments and trials with what their wire objects show."""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ...errors import NotFound
from ...store import reader
from ...store import tables as t
from ..common.states import AllocState
from ..metrics import _series as stored
from . import trial_list
from .trial_list import TrialValidations

# A trial view is every column but the metrics' ingestion bookkeeping (JSON decoded per row:
# an experiment table of hundreds of trials paid for it).
_TRIAL_VIEW_COLUMNS = [c for c in t.trials.c if c.name != "report_counts"]


# An allocation still live (its trial's state shows it).
_LIVE = t.allocations.c.state != AllocState.TERMINATED.value
_LIVE_ALLOCATION_STATES = sa.select(t.allocations.c.trial_id, t.allocations.c.state).where(
    t.allocations.c.trial_id.in_(sa.bindparam("ids", expanding=True)), _LIVE)
# Trials by id (a chart's, a trial page's), built once (building and keying these statements per
# request cost more than running them), in one round trip: every column (a chart checks its
# stored series against ``report_counts``) and the live allocations' states, joined by commas.
_STATES_SEP = ","
_TRIALS_WITH_LIVE_STATES = sa.select(
    t.trials, sa.select(sa.func.aggregate_strings(t.allocations.c.state, _STATES_SEP))
    .where(t.allocations.c.trial_id == t.trials.c.id, _LIVE).scalar_subquery().label("live_states"))
_TRIALS_BY_ID = (_TRIALS_WITH_LIVE_STATES.where(t.trials.c.id.in_(sa.bindparam("ids", expanding=True)))
                 .order_by(t.trials.c.id))
@functools.cache
def _pg_trials_by_id(dialect: sa.Dialect, n: int) -> tuple[str, dict[str, Any], list[str]]:
    """``_TRIALS_BY_ID`` of ``n`` trials on PostgreSQL as the driver's SQL, one parameter per
    id (as the blocks statements sent in the same pipeline have): its text, its fixed
    parameters and the ids' parameter names, compiled once per dialect and number of trials."""
    ids = [f"id{i}" for i in range(n)]
    compiled = (_TRIALS_WITH_LIVE_STATES.where(t.trials.c.id.in_([sa.bindparam(k, value=0) for k in ids]))
                .order_by(t.trials.c.id)
                .compile(dialect=dialect, compile_kwargs={"render_postcompile": True}))
    return compiled.string, {k: v for k, v in compiled.params.items() if k not in ids}, ids


def _trial_view(row: Any) -> TrialView:
    """A trial's view from a row of ``_TRIALS_BY_ID``."""
    return TrialView(row, set(row.live_states.split(_STATES_SEP)) if row.live_states else set())


@dataclass
class ExperimentView:
    row: Any
    username: str
    num_trials: int
    alloc_states: set[str]
    trial_ids: list[int] = field(default_factory=list)
    best: tuple[int, float] | None = None
    progress: float = 0.0


@dataclass
class TrialView:
    row: Any
    alloc_states: set[str]




def _progress(exp: Any, trials: list[Any]) -> float:
    """The experiment's progress: the searcher's own figure, or for searchers whose trials run
    to their own length (single, random, grid), the trials' reported progress: completed
    trials count whole, others (running, canceled, errored) by the progress they reported, so
    an experiment stopped early does not read 100%."""
    done = sum(1.0 if tr.state == "COMPLETED" else (tr.progress or 0.0) for tr in trials)
    return progress_of(exp.progress, exp.config.get("searcher", {}), len(trials), done, exp.state)


def progress_of(stored: float | None, searcher: dict, n_trials: int, done: float,
                state: str | None = None) -> float:
    """``_progress`` from its sums: ``done`` counts completed trials whole and others by their
    progress (so a caller can compute it in SQL)."""
    stored = stored or 0.0
    name = searcher.get("name")
    if name == "single":
        expected = 1
    elif name == "random":
        expected = int(searcher.get("max_trials") or 1)
    elif name == "grid":
        expected = max(n_trials, 1)
    else:
        return stored
    share = min(1.0, done / max(expected, 1))
    if state in _STOPPED_EARLY:
        return share  # the searcher counted its closed trials as done; the work was not
    return max(stored, share)


#: Experiment states whose trials did not all finish: progress counts completed work only.
_STOPPED_EARLY = frozenset({"CANCELED", "ERROR", "STOPPING_CANCELED", "STOPPING_ERROR", "STOPPING_KILLED"})


class Views:
    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips

    def experiments(
        self, *, ids: list[int] | None = None, users: list[str] | None = None, states: list[str] | None = None,
        archived: bool | None = None, name: str | None = None, project_id: int | None = None,
        offset: int = 0, limit: int = 0, descending: bool = False,
        workspace_ids: frozenset[int] | None = None,
    ) -> tuple[list[ExperimentView], int]:
        """``workspace_ids``: only experiments in those workspaces (None: all)."""
        q = (sa.select(t.experiments, t.users.c.username, t.projects.c.name.label("project_name"),
                       t.projects.c.workspace_id, t.workspaces.c.name.label("workspace_name"))
             .join(t.users, t.users.c.id == t.experiments.c.owner_id)
             .join(t.projects, t.projects.c.id == t.experiments.c.project_id)
             .join(t.workspaces, t.workspaces.c.id == t.projects.c.workspace_id))
        if workspace_ids is not None:
            q = q.where(t.experiments.c.project_id.in_(
                sa.select(t.projects.c.id).where(t.projects.c.workspace_id.in_(sorted(workspace_ids)))))
        if ids is not None:
            q = q.where(t.experiments.c.id.in_(ids))
        if users:
            q = q.where(t.users.c.username.in_(users))
        if states:
            q = q.where(t.experiments.c.state.in_(states))
        if archived is not None:
            q = q.where(t.experiments.c.archived.is_(archived))
        if name:
            q = q.where(t.experiments.c.name.contains(name))
        if project_id:
            q = q.where(t.experiments.c.project_id == project_id)
        with self._reader.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(q.subquery())).scalar_one()
            q = q.order_by(t.experiments.c.id.desc() if descending else t.experiments.c.id)
            if offset:
                q = q.offset(offset)
            if limit:
                q = q.limit(limit)
            rows = conn.execute(q).all()
            views = self._decorate(conn, rows)
        return views, total

    def _decorate(self, conn: sa.Connection, rows: list[Any]) -> list[ExperimentView]:
        ids = [r.id for r in rows]
        if not ids:
            return []
        trials_by_exp: dict[int, list[Any]] = defaultdict(list)
        for tr in conn.execute(
            sa.select(t.trials.c.id, t.trials.c.experiment_id, t.trials.c.best_validation,
                      t.trials.c.progress, t.trials.c.state)
            .where(t.trials.c.experiment_id.in_(ids)).order_by(t.trials.c.id)
        ):
            trials_by_exp[tr.experiment_id].append(tr)
        states: dict[int, set[str]] = defaultdict(set)
        for a in conn.execute(
            sa.select(t.trials.c.experiment_id, t.allocations.c.state)
            .join(t.trials, t.trials.c.id == t.allocations.c.trial_id)
            .where(t.trials.c.experiment_id.in_(ids), _LIVE)
        ):
            states[a.experiment_id].add(a.state)
        views = []
        for r in rows:
            trs = trials_by_exp[r.id]
            sign = 1.0 if r.config.get("searcher", {}).get("smaller_is_better", True) else -1.0
            scored = [(sign * tr.best_validation, tr.id, tr.best_validation) for tr in trs if tr.best_validation is not None]
            best = None
            if scored:
                _, tid, value = min(scored)
                best = (tid, value)
            views.append(ExperimentView(r, r.username, len(trs), states[r.id], [tr.id for tr in trs], best,
                                        _progress(r, trs)))
        return views

    def experiment(self, exp_id: int) -> ExperimentView | None:
        views, _ = self.experiments(ids=[exp_id])
        return views[0] if views else None

    def trials(
        self, *, exp_id: int | None = None, trial_ids: list[int] | None = None, states: list[str] | None = None,
        offset: int = 0, limit: int = 0, descending: bool = False, count: bool = True,
    ) -> tuple[list[TrialView], int]:
        """Trials and the total matching (``count=False``: the total is -1, not counted)."""
        if (trial_ids is not None and exp_id is None and not (states or offset or limit or descending or count)):
            with self._reader.connect() as conn:
                rows = conn.execute(_TRIALS_BY_ID, {"ids": list(trial_ids)}).all()
            return [_trial_view(r) for r in rows], -1
        q = sa.select(*_TRIAL_VIEW_COLUMNS)
        if exp_id is not None:
            q = q.where(t.trials.c.experiment_id == exp_id)
        if trial_ids is not None:
            q = q.where(t.trials.c.id.in_(trial_ids))
        if states:
            q = q.where(t.trials.c.state.in_(states))
        with self._reader.connect() as conn:
            total = (conn.execute(sa.select(sa.func.count()).select_from(q.subquery())).scalar_one()
                     if count else -1)
            q = q.order_by(t.trials.c.id.desc() if descending else t.trials.c.id)
            if offset:
                q = q.offset(offset)
            if limit:
                q = q.limit(limit)
            rows = conn.execute(q).all()
            # An experiment's trials by a subquery: hundreds of ids as parameters cost more to
            # compile and bind than the query takes.
            ids: Any = ([r.id for r in rows] if exp_id is None or offset or limit or states
                        else sa.select(t.trials.c.id).where(t.trials.c.experiment_id == exp_id))
            return self._with_allocation_states(conn, rows, ids), total

    def trials_with_history(self, trial_ids: list[int], group: str, name: str,
                            ) -> tuple[list[TrialView], dict[int, str]]:
        """The trials' views, as ``trials(trial_ids=…, count=False)``, and the whole stored
        histories of metric ``name`` of ``group`` of those whose stored series is complete
        (``_metric_series.read``): a chart of one metric of a trial or a few, the trial page's
        (each number of trials is a statement of its own). On PostgreSQL the reads take one
        round trip (pipelined)."""
        with self._reader.connect() as conn:
            if conn.dialect.name == "postgresql":
                sql, fixed, names = _pg_trials_by_id(conn.dialect, len(trial_ids))
                params = {**fixed, **dict(zip(names, map(int, trial_ids), strict=True))}
                rows, histories = stored.read_with_rows(conn, sql, params, trial_ids, group, name)
            else:
                rows = conn.execute(_TRIALS_BY_ID, {"ids": list(trial_ids)}).all()
                histories = stored.read(conn, [r.id for r in rows], group, name, 0,
                                        [(r.id, r.summary, r.report_counts) for r in rows])
        return [_trial_view(r) for r in rows], histories

    @staticmethod
    def _with_allocation_states(conn: sa.Connection, rows: list, ids: Any) -> list[TrialView]:
        """Views of trial ``rows`` with their live allocations' states (``ids``: the rows' ids,
        as a list or a subquery)."""
        states_by: dict[int, set[str]] = defaultdict(set)
        if rows:
            query = (_LIVE_ALLOCATION_STATES if isinstance(ids, list) else
                     sa.select(t.allocations.c.trial_id, t.allocations.c.state).where(
                         t.allocations.c.trial_id.in_(ids), _LIVE))
            for a in conn.execute(query, {"ids": ids} if isinstance(ids, list) else {}):
                states_by[a.trial_id].add(a.state)
        return [TrialView(r, states_by[r.id]) for r in rows]

    def trial(self, trial_id: int) -> TrialView | None:
        views, _ = self.trials(trial_ids=[trial_id], count=False)
        return views[0] if views else None

    def task_allocations(self, task_id: str) -> list[sa.Row]:
        """Every allocation of a task, first submitted first."""
        with self._reader.connect() as conn:
            return list(conn.execute(
                sa.select(t.allocations).where(t.allocations.c.task_id == task_id)
                .order_by(t.allocations.c.submitted_at, t.allocations.c.allocation_id)))

    def task(self, task_id: str) -> tuple[str, sa.Row]:
        """A task (``GET /api/v1/tasks/{id}``): its kind (``TRIAL``, ``NOTEBOOK``, ``COMMAND``...)
        and its row (the trial's, or the interactive task's); NotFound when there is none."""
        with self._reader.connect() as conn:
            trial = conn.execute(sa.select(t.trials.c.start_time, t.trials.c.end_time)
                                 .where(t.trials.c.task_id == task_id)).first()
            if trial is not None:
                return "TRIAL", trial
            row = conn.execute(sa.select(t.commands.c.task_type, t.commands.c.start_time,
                                         t.commands.c.end_time, t.commands.c.config)
                               .where(t.commands.c.task_id == task_id)).first()
        if row is None:
            raise NotFound(f"task {task_id} not found")
        return row.task_type, row

    def experiment_trials(
        self, exp_id: int, config: dict, *, states: list[str] | None = None, sort_by: str = "SORT_BY_ID",
        descending: bool = False, offset: int = 0, limit: int = 0, now: float = 0.0,
    ) -> tuple[list[TrialView], int, int, dict[int, TrialValidations]]:
        """A page of the experiment's trials as ``GetExperimentTrials`` orders it
        (``_trial_list``): the views, the total, the page's start index, and the page's
        trials' best and latest validations."""
        searcher = config.get("searcher") or {}
        metric, smaller = searcher.get("metric"), bool(searcher.get("smaller_is_better", True))
        q = sa.select(*_TRIAL_VIEW_COLUMNS).where(t.trials.c.experiment_id == exp_id)
        if states:
            q = q.where(t.trials.c.state.in_(states))
        in_python = sort_by in trial_list.SORTED_IN_PYTHON
        with self._reader.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(q.subquery())).scalar_one()
            start, end = trial_list.page_bounds(total, offset, limit)
            if start >= end:
                return [], total, start, {}
            if in_python:
                rows = conn.execute(q).all()
                if sort_by == "SORT_BY_LATEST_VALIDATION_METRIC":
                    values = trial_list.latest_values(self._validations(conn, [r.id for r in rows], metric, smaller),
                                                      metric, smaller)
                else:
                    values = {r.id: 0.0 for r in rows} | self._checkpoint_sizes(conn, exp_id)
                rows = trial_list.sort_in_python(rows, values, descending)[start:end]
            else:
                q = q.order_by(*trial_list.sql_order(sort_by, descending, smaller_is_better=smaller, now=now))
                rows = conn.execute(q.offset(start).limit(end - start)).all()
            # The whole experiment: its trials by a subquery (see ``trials``), not by ids.
            ids: Any = ([r.id for r in rows] if states or end - start < total
                        else sa.select(t.trials.c.id).where(t.trials.c.experiment_id == exp_id))
            views = self._with_allocation_states(conn, rows, ids)
            return views, total, start, self._validations(conn, ids, metric, smaller)

    def validations(self, trial_ids: list[int], config: dict) -> dict[int, TrialValidations]:
        """The trials' best and latest validation reports by ``config``'s searcher metric."""
        searcher = config.get("searcher") or {}
        with self._reader.connect() as conn:
            return self._validations(conn, trial_ids, searcher.get("metric"),
                                     bool(searcher.get("smaller_is_better", True)))

    @staticmethod
    def _validations(conn: sa.Connection, trial_ids: Any, metric: str | None,
                     smaller: bool) -> dict[int, TrialValidations]:
        """``trial_ids``: a list, or a subquery of them."""
        if (isinstance(trial_ids, list) and not trial_ids) or not metric:
            return {}
        m = t.metrics.c
        rows = conn.execute(sa.select(m.trial_id, m.id, m.steps_completed, m.report_time, m.body).where(
            m.trial_id.in_(trial_ids), m.mgroup == "validation", m.archived.is_(False)))
        return trial_list.summarize(
            ((r.trial_id, trial_list.ValidationReport(r.id, r.steps_completed, r.report_time, json.loads(r.body)))
             for r in rows), metric, smaller)

    @staticmethod
    def _checkpoint_sizes(conn: sa.Connection, exp_id: int) -> dict[int, float]:
        """Bytes of each trial's checkpoints that are not deleted (``SORT_BY_CHECKPOINT_SIZE``)."""
        ck = t.checkpoints.c
        sizes: dict[int, float] = defaultdict(float)
        for r in conn.execute(sa.select(ck.trial_id, ck.resources).where(
                ck.experiment_id == exp_id, ck.state != "DELETED", ck.trial_id.is_not(None))):
            sizes[r.trial_id] += sum(int(v) for v in (r.resources or {}).values() if str(v).isdigit())
        return dict(sizes)
