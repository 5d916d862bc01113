"""The reads behind the API's read models of experiments, trials and tasks
(``services.experiments.views``): filtered and paged lists with their totals, the live
allocations' states that a trial's shown state needs, validation reports, and a chart's trials
with their stored series.

Every function takes an open ``sa.Connection`` (a ``store.reader`` one: these only read) and
plain values; rows come back as SQLAlchemy rows. A trial row is every column but the metrics'
ingestion bookkeeping (``report_counts``), except where said. The trials of a list are named
either by ``trial_ids`` or, for a whole experiment, by ``experiment_id`` (a subquery: hundreds
of ids as parameters cost more to compile and bind than the query takes).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t
from .allocations import TERMINATED
from .metrics import read_series, read_series_with_rows

# A trial view is every column but the metrics' ingestion bookkeeping (JSON decoded per row:
# an experiment table of hundreds of trials paid for it).
_TRIAL_VIEW_COLUMNS = [c for c in t.trials.c if c.name != "report_counts"]

# An allocation still live (its trial's state shows it).
_LIVE = t.allocations.c.state != TERMINATED
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


def live_states_of(row: Any) -> set[str]:
    """The live allocations' states of a row of ``trials_by_id`` or ``trials_with_history``."""
    return set(row.live_states.split(_STATES_SEP)) if row.live_states else set()


def _count(conn: sa.Connection, q: sa.Select) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(q.subquery())).scalar_one()


def _trial_ids(trial_ids: Sequence[int] | None, experiment_id: int | None) -> Any:
    return (list(trial_ids) if trial_ids is not None
            else sa.select(t.trials.c.id).where(t.trials.c.experiment_id == experiment_id))


# -- experiments ----------------------------------------------------------------------------


def experiments(
    conn: sa.Connection, *, ids: Collection[int] | None = None, users: Collection[str] | None = None,
    states: Collection[str] | None = None, archived: bool | None = None, name: str | None = None,
    project_id: int | None = None, offset: int = 0, limit: int = 0, descending: bool = False,
    workspace_ids: frozenset[int] | None = None, labels: Collection[str] | None = None,
) -> tuple[list[sa.Row], int]:
    """A page of the experiments matching every filter given, by id (``limit`` 0: all after
    ``offset``), each with its owner's ``username``, ``project_name``, ``workspace_id`` and
    ``workspace_name``; and how many match. ``workspace_ids``: only experiments in those
    workspaces (None: all); ``name``: a substring; ``labels``: experiments with all of them."""
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
    for label in labels or ():
        # The stored array holds each label as its JSON string (store_json); a quote that is
        # not escaped only ever bounds an element, so the encoded label matches one element.
        q = q.where(sa.cast(t.experiments.c.labels, sa.Text).contains(json.dumps(label), autoescape=True))
    total = _count(conn, q)
    q = q.order_by(t.experiments.c.id.desc() if descending else t.experiments.c.id)
    if offset:
        q = q.offset(offset)
    if limit:
        q = q.limit(limit)
    return list(conn.execute(q).all()), total


def trial_summaries(conn: sa.Connection, experiment_ids: Sequence[int]) -> list[sa.Row]:
    """The experiments' trials (``id``, ``experiment_id``, ``best_validation``, ``progress``,
    ``state``), by id."""
    return list(conn.execute(
        sa.select(t.trials.c.id, t.trials.c.experiment_id, t.trials.c.best_validation,
                  t.trials.c.progress, t.trials.c.state)
        .where(t.trials.c.experiment_id.in_(experiment_ids)).order_by(t.trials.c.id)
    ))


def live_states_of_experiments(conn: sa.Connection, experiment_ids: Sequence[int]) -> dict[int, set[str]]:
    """{experiment: the states of its trials' live allocations}."""
    states: dict[int, set[str]] = defaultdict(set)
    for a in conn.execute(
        sa.select(t.trials.c.experiment_id, t.allocations.c.state)
        .join(t.trials, t.trials.c.id == t.allocations.c.trial_id)
        .where(t.trials.c.experiment_id.in_(experiment_ids), _LIVE)
    ):
        states[a.experiment_id].add(a.state)
    return states


# -- trials ---------------------------------------------------------------------------------


def trials_by_id(conn: sa.Connection, trial_ids: Sequence[int]) -> list[sa.Row]:
    """The trials, by id, with every column and ``live_states`` (``live_states_of``)."""
    return list(conn.execute(_TRIALS_BY_ID, {"ids": list(trial_ids)}).all())


def trials_with_history(conn: sa.Connection, trial_ids: list[int], group: str,
                        name: str) -> tuple[list[sa.Row], dict[int, str]]:
    """``trials_by_id`` and the whole stored histories of metric ``name`` of ``group`` of those
    whose stored series is complete (``store.metrics.read_series``). On PostgreSQL the reads
    take one round trip (pipelined)."""
    if conn.dialect.name == "postgresql":
        sql, fixed, names = _pg_trials_by_id(conn.dialect, len(trial_ids))
        params = {**fixed, **dict(zip(names, map(int, trial_ids), strict=True))}
        return read_series_with_rows(conn, sql, params, trial_ids, group, name)
    rows = trials_by_id(conn, trial_ids)
    return rows, read_series(conn, [r.id for r in rows], group, name, 0,
                             [(r.id, r.summary, r.report_counts) for r in rows])


def trials(
    conn: sa.Connection, *, experiment_id: int | None = None, trial_ids: Sequence[int] | None = None,
    states: Collection[str] | None = None, offset: int = 0, limit: int = 0, descending: bool = False,
    count: bool = True,
) -> tuple[list[sa.Row], int]:
    """A page of the trials matching every filter given, by id; and how many match
    (``count=False``: -1, not counted)."""
    q = sa.select(*_TRIAL_VIEW_COLUMNS)
    if experiment_id is not None:
        q = q.where(t.trials.c.experiment_id == experiment_id)
    if trial_ids is not None:
        q = q.where(t.trials.c.id.in_(trial_ids))
    if states:
        q = q.where(t.trials.c.state.in_(states))
    total = _count(conn, q) if count else -1
    q = q.order_by(t.trials.c.id.desc() if descending else t.trials.c.id)
    if offset:
        q = q.offset(offset)
    if limit:
        q = q.limit(limit)
    return list(conn.execute(q).all()), total


def live_states(conn: sa.Connection, trial_ids: Sequence[int] | None = None, *,
                experiment_id: int | None = None) -> dict[int, set[str]]:
    """{trial: the states of its live allocations}, of ``trial_ids`` or of the experiment's trials."""
    states_by: dict[int, set[str]] = defaultdict(set)
    if trial_ids is not None:
        rows = conn.execute(_LIVE_ALLOCATION_STATES, {"ids": list(trial_ids)})
    else:
        rows = conn.execute(sa.select(t.allocations.c.trial_id, t.allocations.c.state).where(
            t.allocations.c.trial_id.in_(_trial_ids(None, experiment_id)), _LIVE), {})
    for a in rows:
        states_by[a.trial_id].add(a.state)
    return states_by


def validation_reports(conn: sa.Connection, trial_ids: Sequence[int] | None = None, *,
                       experiment_id: int | None = None) -> list[sa.Row]:
    """The visible validation reports (``trial_id``, ``id``, ``steps_completed``,
    ``report_time``, ``body``) of ``trial_ids`` or of the experiment's trials."""
    m = t.metrics.c
    return list(conn.execute(sa.select(m.trial_id, m.id, m.steps_completed, m.report_time, m.body).where(
        m.trial_id.in_(_trial_ids(trial_ids, experiment_id)), m.mgroup == "validation", m.archived.is_(False))))


def checkpoint_resources(conn: sa.Connection, experiment_id: int) -> list[sa.Row]:
    """The ``trial_id`` and ``resources`` (file: size) of the experiment's trials' checkpoints
    that are not DELETED."""
    ck = t.checkpoints.c
    return list(conn.execute(sa.select(ck.trial_id, ck.resources).where(
        ck.experiment_id == experiment_id, ck.state != "DELETED", ck.trial_id.is_not(None))))


# -- an experiment's trial list as 0.38.1 sorts it ------------------------------------------


def _nulls_largest(column: Any, descending: bool) -> Any:
    return column.desc().nulls_first() if descending else column.asc().nulls_last()


def _order(sort_by: str, descending: bool, *, smaller_is_better: bool, now: float) -> list[Any]:
    """The ORDER BY of a sort the trial row answers: a missing value sorts largest (NULLs
    last ascending, first descending), ties by id in the same direction; a sort the row does
    not answer is by id alone."""
    tr = t.trials.c
    keys: dict[str, Callable[[], Any]] = {
        "SORT_BY_START_TIME": lambda: tr.start_time,
        "SORT_BY_END_TIME": lambda: tr.end_time,
        "SORT_BY_STATE": lambda: tr.state,
        "SORT_BY_BEST_VALIDATION_METRIC": lambda: tr.best_validation * (1.0 if smaller_is_better else -1.0),
        "SORT_BY_BATCHES_PROCESSED": lambda: tr.total_batches,
        "SORT_BY_DURATION": lambda: sa.func.coalesce(tr.end_time, sa.literal(now, sa.Float)) - tr.start_time,
        "SORT_BY_RESTARTS": lambda: tr.restarts,
    }
    key = keys.get(sort_by)
    head = [] if key is None else [_nulls_largest(key(), descending)]
    return [*head, tr.id.desc() if descending else tr.id.asc()]


def _of_experiment(experiment_id: int, states: Collection[str] | None) -> sa.Select:
    q = sa.select(*_TRIAL_VIEW_COLUMNS).where(t.trials.c.experiment_id == experiment_id)
    if states:
        q = q.where(t.trials.c.state.in_(states))
    return q


def count_of_experiment(conn: sa.Connection, experiment_id: int, states: Collection[str] | None = None) -> int:
    """How many of the experiment's trials are in ``states`` (none given: all)."""
    return _count(conn, _of_experiment(experiment_id, states))


def of_experiment(conn: sa.Connection, experiment_id: int, states: Collection[str] | None = None) -> list[sa.Row]:
    """The experiment's trials in ``states`` (none given: all), unordered."""
    return list(conn.execute(_of_experiment(experiment_id, states)).all())


def of_experiment_sorted(
    conn: sa.Connection, experiment_id: int, states: Collection[str] | None, *, sort_by: str,
    descending: bool, smaller_is_better: bool, now: float, start: int, count: int,
) -> list[sa.Row]:
    """``count`` of the experiment's trials in ``states`` from index ``start``, ordered by
    ``sort_by`` (a ``v1GetExperimentTrialsRequestSortBy`` the row answers; the best validation
    signed by ``smaller_is_better``, a duration until ``now`` for a trial still running)."""
    q = _of_experiment(experiment_id, states).order_by(
        *_order(sort_by, descending, smaller_is_better=smaller_is_better, now=now))
    return list(conn.execute(q.offset(start).limit(count)).all())


# -- tasks ----------------------------------------------------------------------------------


def task_allocations(conn: sa.Connection, task_id: str) -> list[sa.Row]:
    """Every allocation of a task, first submitted first."""
    return list(conn.execute(
        sa.select(t.allocations).where(t.allocations.c.task_id == task_id)
        .order_by(t.allocations.c.submitted_at, t.allocations.c.allocation_id)))


def trial_task(conn: sa.Connection, task_id: str) -> sa.Row | None:
    """The ``start_time`` and ``end_time`` of the trial whose task it is (None: no trial's)."""
    return conn.execute(sa.select(t.trials.c.start_time, t.trials.c.end_time)
                        .where(t.trials.c.task_id == task_id)).first()


def command_task(conn: sa.Connection, task_id: str) -> sa.Row | None:
    """The ``task_type``, ``start_time``, ``end_time`` and ``config`` of the interactive task
    (None: there is none)."""
    return conn.execute(sa.select(t.commands.c.task_type, t.commands.c.start_time,
                                  t.commands.c.end_time, t.commands.c.config)
                        .where(t.commands.c.task_id == task_id)).first()
