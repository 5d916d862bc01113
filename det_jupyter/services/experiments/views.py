"""Read models for the API: experiments and trials with what their wire objects show."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ...errors import NotFound
from ...store import reader
from ...store import views as store
from . import trial_list
from .trial_list import TrialValidations


def _trial_view(row: Any) -> TrialView:
    """A trial's view from a row of ``store.views.trials_by_id``."""
    return TrialView(row, store.live_states_of(row))


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
        workspace_ids: frozenset[int] | None = None, labels: list[str] | None = None,
    ) -> tuple[list[ExperimentView], int]:
        """``workspace_ids``: only experiments in those workspaces (None: all); ``labels``: only
        experiments that carry every one of them."""
        with self._reader.connect() as conn:
            rows, total = store.experiments(
                conn, ids=ids, users=users, states=states, archived=archived, name=name, project_id=project_id,
                offset=offset, limit=limit, descending=descending, workspace_ids=workspace_ids, labels=labels)
            views = self._decorate(conn, rows)
        return views, total

    def _decorate(self, conn: sa.Connection, rows: list[Any]) -> list[ExperimentView]:
        ids = [r.id for r in rows]
        if not ids:
            return []
        trials_by_exp: dict[int, list[Any]] = defaultdict(list)
        for tr in store.trial_summaries(conn, ids):
            trials_by_exp[tr.experiment_id].append(tr)
        states = store.live_states_of_experiments(conn, ids)
        views = []
        for r in rows:
            trs = trials_by_exp[r.id]
            sign = 1.0 if r.config.get("searcher", {}).get("smaller_is_better", True) else -1.0
            scored = [(sign * tr.best_validation, tr.id, tr.best_validation) for tr in trs if tr.best_validation is not None]
            best = None
            if scored:
                _, tid, value = min(scored)
                best = (tid, value)
            views.append(ExperimentView(r, r.username, len(trs), states.get(r.id, set()), [tr.id for tr in trs], best,
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
                rows = store.trials_by_id(conn, trial_ids)
            return [_trial_view(r) for r in rows], -1
        with self._reader.connect() as conn:
            rows, total = store.trials(conn, experiment_id=exp_id, trial_ids=trial_ids, states=states,
                                       offset=offset, limit=limit, descending=descending, count=count)
            # An experiment's trials by the experiment (a subquery): hundreds of ids as
            # parameters cost more to compile and bind than the query takes.
            ids = [r.id for r in rows] if exp_id is None or offset or limit or states else None
            return self._with_allocation_states(conn, rows, ids, exp_id), total

    def trials_with_history(self, trial_ids: list[int], group: str, name: str,
                            ) -> tuple[list[TrialView], dict[int, str]]:
        """The trials' views, as ``trials(trial_ids=…, count=False)``, and the whole stored
        histories of metric ``name`` of ``group`` of those whose stored series is complete
        (``_metric_series.read``): a chart of one metric of a trial or a few, the trial page's
        (each number of trials is a statement of its own). On PostgreSQL the reads take one
        round trip (pipelined)."""
        with self._reader.connect() as conn:
            rows, histories = store.trials_with_history(conn, trial_ids, group, name)
        return [_trial_view(r) for r in rows], histories

    @staticmethod
    def _with_allocation_states(conn: sa.Connection, rows: list, ids: list[int] | None,
                                exp_id: int | None) -> list[TrialView]:
        """Views of trial ``rows`` with their live allocations' states (``ids``: the rows' ids;
        None: they are all of experiment ``exp_id``'s trials)."""
        states_by = store.live_states(conn, ids, experiment_id=exp_id) if rows else {}
        return [TrialView(r, states_by.get(r.id, set())) for r in rows]

    def trial(self, trial_id: int) -> TrialView | None:
        views, _ = self.trials(trial_ids=[trial_id], count=False)
        return views[0] if views else None

    def task_allocations(self, task_id: str) -> list[sa.Row]:
        """Every allocation of a task, first submitted first."""
        with self._reader.connect() as conn:
            return store.task_allocations(conn, task_id)

    def task(self, task_id: str) -> tuple[str, sa.Row]:
        """A task (``GET /api/v1/tasks/{id}``): its kind (``TRIAL``, ``NOTEBOOK``, ``COMMAND``...)
        and its row (the trial's, or the interactive task's); NotFound when there is none."""
        with self._reader.connect() as conn:
            trial = store.trial_task(conn, task_id)
            if trial is not None:
                return "TRIAL", trial
            row = store.command_task(conn, task_id)
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
        in_python = sort_by in trial_list.SORTED_IN_PYTHON
        with self._reader.connect() as conn:
            total = store.count_of_experiment(conn, exp_id, states)
            start, end = trial_list.page_bounds(total, offset, limit)
            if start >= end:
                return [], total, start, {}
            if in_python:
                rows = store.of_experiment(conn, exp_id, states)
                if sort_by == "SORT_BY_LATEST_VALIDATION_METRIC":
                    values = trial_list.latest_values(self._validations(conn, [r.id for r in rows], metric, smaller),
                                                      metric, smaller)
                else:
                    values = {r.id: 0.0 for r in rows} | self._checkpoint_sizes(conn, exp_id)
                rows = trial_list.sort_in_python(rows, values, descending)[start:end]
            else:
                rows = store.of_experiment_sorted(conn, exp_id, states, sort_by=sort_by, descending=descending,
                                                  smaller_is_better=smaller, now=now, start=start,
                                                  count=end - start)
            # The whole experiment: its trials by the experiment (see ``trials``), not by ids.
            ids = [r.id for r in rows] if states or end - start < total else None
            views = self._with_allocation_states(conn, rows, ids, exp_id)
            return views, total, start, self._validations(conn, ids, metric, smaller, exp_id)

    def validations(self, trial_ids: list[int], config: dict) -> dict[int, TrialValidations]:
        """The trials' best and latest validation reports by ``config``'s searcher metric."""
        searcher = config.get("searcher") or {}
        with self._reader.connect() as conn:
            return self._validations(conn, trial_ids, searcher.get("metric"),
                                     bool(searcher.get("smaller_is_better", True)))

    @staticmethod
    def _validations(conn: sa.Connection, trial_ids: list[int] | None, metric: str | None,
                     smaller: bool, exp_id: int | None = None) -> dict[int, TrialValidations]:
        """``trial_ids``: a list; None: all of experiment ``exp_id``'s trials."""
        if (trial_ids is not None and not trial_ids) or not metric:
            return {}
        rows = store.validation_reports(conn, trial_ids, experiment_id=exp_id)
        return trial_list.summarize(
            ((r.trial_id, trial_list.ValidationReport(r.id, r.steps_completed, r.report_time, json.loads(r.body)))
             for r in rows), metric, smaller)

    @staticmethod
    def _checkpoint_sizes(conn: sa.Connection, exp_id: int) -> dict[int, float]:
        """Bytes of each trial's checkpoints that are not deleted (``SORT_BY_CHECKPOINT_SIZE``)."""
        sizes: dict[int, float] = defaultdict(float)
        for r in store.checkpoint_resources(conn, exp_id):
            sizes[r.trial_id] += sum(int(v) for v in (r.resources or {}).values() if str(v).isdigit())
        return dict(sizes)
