"""/api/v1/trials/... and /api/v1/runs/...: what users read and what tasks report."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

from ..errors import InvalidRequest, NotFound
from ..services.access.authz import Perm
from ..services.checkpoints import order as ckorder
from ..services.common.states import TERMINAL, State
from ..services.experiments.unmanaged import patched_state
from ..services.metrics.service import parse_report, parse_reports
from ..services.metrics.timeseries import SeriesQuery
from . import _serialize as ser
from ._api import ANY_OBJECT, MAX_ID, Q, api, array, echo, integer, obj, paging, string
from ._base import DetHandler
from ._checkpoint_query import CHECKPOINT_LIST, checkpoint_query
from ._log_filters import QUERY as LOG_QUERY
from ._log_filters import log_filter
from ._wire import EXITED_REASONS, METRIC_TYPES, TRIAL_STATES

_STEPS = integer(0, 2**31 - 1)
#: One report: ``v1TrialMetrics``' fields (``metrics`` as ``{avgMetrics, batchMetrics}`` or the
#: values themselves), or our harness's flat form.
_METRICS = {"type": "object", "maxProperties": 10_000}
REPORT = obj(group=string(64), stepsCompleted=_STEPS, metrics=_METRICS, reportTime=string(64),
             trialId=integer(), trialRunId=integer())


def trial_view(handler: DetHandler, trial_id: int) -> Any:
    handler.require_trial(trial_id)
    handler.authorize_trial(trial_id)
    view = handler.master.views.trial(trial_id)
    if view is None:
        raise NotFound(f"trial {trial_id} not found")
    return view


class TrialHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA, "PATCH": Perm.UPDATE_EXPERIMENT_METADATA}
    allow_task = True

    @api()
    def get(self, trial_id: str) -> None:
        v = trial_view(self, int(trial_id))
        config = self.master.experiments.get(v.row.experiment_id).config
        validations = self.master.views.validations([v.row.id], config).get(v.row.id)
        self.send({"trial": ser.trial(v.row, alloc_states=v.alloc_states, validations=validations)})

    @api(body=obj(trialId=echo(integer(), "trial_id"), state={"type": "string", "enum": list(TRIAL_STATES)}))
    def patch(self, trial_id: str) -> None:
        """``PatchTrial``: an unmanaged trial's heartbeat (no state) or its process setting its
        state (RUNNING, COMPLETED, ERROR…); its experiment follows (``services.unmanaged``)."""
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        body = self.body_json()
        if body.get("trialId") not in (None, tid):
            raise InvalidRequest(f"trialId {body['trialId']!r} differs from the trial in the path")
        state = body.get("state")
        self.master.experiments.unmanaged.patch_trial(tid, None if state is None else patched_state(state))
        v = trial_view(self, tid)
        self.send({"trial": ser.trial(v.row, alloc_states=v.alloc_states)})


class TrialKillHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api()
    def post(self, trial_id: str) -> None:
        trial_view(self, int(trial_id))
        self.master.trials.kill_trial(int(trial_id))
        self.send({})


class TrialMetricsHandler(DetHandler):
    """``POST /api/v1/trials/{id}/metrics`` — one report, Determined's shape."""
    max_body = 8 * 1024 * 1024

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(("group", "metrics"), group=string(64), metrics=obj(
        ("metrics", "stepsCompleted"), metrics={**obj(avgMetrics=_METRICS, batchMetrics=array(ANY_OBJECT)),
                                                "maxProperties": 10_000},
        stepsCompleted=_STEPS, trialId=integer(), trialRunId=integer(), reportTime=string(64))),
        body_required=True, errors=(409,))
    def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        body = self.body_json()
        m = body["metrics"]
        report = parse_report(
            {"group": body.get("group"), "stepsCompleted": m.get("stepsCompleted"), "metrics": m.get("metrics")},
            time.time(),
        )
        # A continued unmanaged trial's new run replaces what its earlier runs reported from here.
        self.master.experiments.unmanaged.rewind_for(tid, m.get("trialRunId"), report.group, report.steps_completed)
        self.master.reports.report(tid, m.get("trialRunId"), [report])
        self.send({})


class TrialMetricsBatchHandler(DetHandler):
    """``POST /api/v1/trials/{id}/metrics/batch`` — our harness's many reports in one request."""
    max_body = 64 * 1024 * 1024

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(("reports",), reports=array(REPORT, 20_000), trialRunId=integer()),
         body_required=True, errors=(409,))
    async def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        body = await self.body_json_async()
        parsed = parse_reports(body.get("reports"), time.time())
        self.master.reports.report(tid, body.get("trialRunId"), parsed)
        self.send({"accepted": len(parsed)})


class TrialProgressHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    # Values past [0, 1] are clamped (a raw progress may overshoot).
    @api(body=obj(("progress",), progress={"type": "number"}, trialId=integer(), isRaw={"type": "boolean"}),
         body_required=True)
    def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        progress = self.body_json()["progress"]
        self.master.trials.set_progress(tid, max(0.0, min(1.0, float(progress))))
        self.send({})


class TrialEarlyExitHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(reason={"type": "string", "enum": list(EXITED_REASONS)},
                  earlyExit=obj(reason={"type": "string", "enum": list(EXITED_REASONS)})), body_required=True)
    def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        body = self.body_json()
        reason = body.get("reason") or (body.get("earlyExit") or {}).get("reason")
        if reason is None:
            raise InvalidRequest("reason is required, e.g. EXITED_REASON_INVALID_HP")
        self.master.trials.set_early_exit(tid, reason)
        self.send({})


class TrialRunnerMetadataHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(state=string(4096)))
    def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.require_trial(tid)
        self.authorize_trial(tid)
        state = self.body_json().get("state")
        self.master.trials.set_runner_state(tid, str(state or "")[:255])
        self.send({})


class TrialCheckpointsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    @api(query=CHECKPOINT_LIST)
    def get(self, trial_id: str) -> None:
        v = trial_view(self, int(trial_id))
        query = checkpoint_query(self)
        config = self.master.experiments.get(v.row.experiment_id).config
        page = self.master.checkpoints.listing(config, query, trial_id=v.row.id)
        self.send({"checkpoints": [ser.listed_checkpoint(c, trial_row=v.row, exp_config=config) for c in page.items],
                   "pagination": ckorder.pagination(query.offset, query.limit, page.start, page.end, page.total)})


class TrialWorkloadsHandler(DetHandler):
    """Training and validation reports and checkpoints, merged in step order, paged in SQL."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}
    allow_task = True  # a trial's own task, and a TensorBoard over it (require_trial)
    _GROUPS = ("training", "validation")

    @api(query=paging())
    def get(self, trial_id: str) -> None:
        tid = int(trial_id)
        trial_view(self, tid)
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        descending = self.get_query_argument("orderBy", "") == "ORDER_BY_DESC"
        metrics = self.master.metrics
        ckpts = self.master.checkpoints.for_trial(tid)
        total = metrics.count(tid, self._GROUPS) + len(ckpts)
        # Ascending pages need only the first offset+limit reports: checkpoints are few and
        # all of them are merged in, so the page is exact.
        rows = metrics.history(tid, self._GROUPS, limit=offset + limit if limit and not descending else None)
        items: list[tuple[int, int, dict]] = [
            (r["steps_completed"], 0 if r["group"] == "training" else 1,
             {r["group"]: ser.metrics_workload(r, tid)})
            for r in rows
        ]
        for c in ckpts:
            items.append((c.steps_completed, 2, {"checkpoint": {
                "uuid": c.uuid, "state": "STATE_" + c.state, "totalBatches": c.steps_completed,
                "endTime": ser.ts(c.report_time), "resources": c.resources, "metadata": c.ckpt_metadata}}))
        items.sort(key=lambda x: (x[0], x[1]), reverse=descending)
        page = items[offset: offset + limit] if limit else items[offset:]
        self.send({"workloads": [w for _, _, w in page],
                   "pagination": ser.pagination(offset, limit, total, len(page))})


_TRIAL_IDS = Q("trialIds", "integer", many=True, minimum=1, maximum=MAX_ID, max_items=500, required=True)


class TrialsMetricsHandler(DetHandler):
    """``GET /api/v1/trials/metrics/trial_metrics?group=G&trialIds=…`` (``Trial.iter_metrics``,
    ``client.iter_trials_metrics``): every visible report of the trials in ``group``, trials by
    id, each in step order, as NDJSON lines of ``{"metrics": [v1MetricsReport, …]}`` of up to
    ``BATCH`` reports; what is stored when the request comes (it does not follow, as 0.38.1's
    does not). A trial named twice is read once. ``training_metrics`` and
    ``validation_metrics`` are the same for one group."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}
    allow_task = True  # a trial's own task, reading its own metrics back
    BATCH = 1000

    @api(query=[_TRIAL_IDS, Q("group", max_length=64, required=True, pattern="^.+$",
                               description="the metrics group: training, validation or your own")])
    async def get(self) -> None:
        await self.stream(self.get_query_argument("group", ""))

    async def stream(self, group: str) -> None:
        ids = sorted({int(v) for v in self.get_query_arguments("trialIds") if v})  # "?trialIds=": none
        if not ids:
            raise InvalidRequest("trialIds is required: the trials to read (?trialIds=1&trialIds=2)")
        for tid in ids:
            self.require_trial(tid)
            self.authorize_trial(tid)
        # The key of every report, the way the stock client reads it: validation reports under
        # validation_metrics, every other group under avg_metrics.
        key = "validation_metrics" if group == "validation" else "avg_metrics"
        self.set_header("Content-Type", "application/x-ndjson")
        metrics = self.master.metrics
        loop = asyncio.get_running_loop()
        for tid in ids:
            offset = 0
            while True:
                rows = await loop.run_in_executor(None, functools.partial(
                    metrics.history, tid, group, offset=offset, limit=self.BATCH))
                if rows:
                    self.write(ser.ndjson({"metrics": [ser.metrics_report(r, tid, {key: r["metrics"]})
                                                       for r in rows]}))
                    await self.flush()
                if len(rows) < self.BATCH:
                    break
                offset += len(rows)
        self.finish()


class TrainingMetricsHandler(TrialsMetricsHandler):
    """``GET /api/v1/trials/metrics/training_metrics`` (``stream_trials_training_metrics``)."""

    @api(query=[_TRIAL_IDS])
    async def get(self) -> None:
        await self.stream("training")


class ValidationMetricsHandler(TrialsMetricsHandler):
    """``GET /api/v1/trials/metrics/validation_metrics`` (``stream_trials_validation_metrics``)."""

    @api(query=[_TRIAL_IDS])
    async def get(self) -> None:
        await self.stream("validation")


class TrialLogsHandler(DetHandler):
    """NDJSON stream of a trial's logs; with ``follow`` it ends once the trial is over."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    @api(query=LOG_QUERY)
    async def get(self, trial_id: str) -> None:
        tid = int(trial_id)
        trial_view(self, tid)
        self.set_header("Content-Type", "application/x-ndjson")
        follow = self.bool_arg("follow")
        where = log_filter(self)
        limit = self.int_arg("limit", 0) or 0
        descending = self.get_query_argument("orderBy", "") == "ORDER_BY_DESC"
        logs = self.master.logs
        rows = logs.query(trial_id=tid, where=where, limit=limit, descending=descending)
        last = max((r.id for r in rows), default=0)
        for r in rows:
            self.write(ser.ndjson(ser.trial_log(r, tid)))
        await self.flush()
        while follow and not self.request.connection.stream.closed():
            done = State(self.master.trials.state(tid)) in TERMINAL
            rows = logs.query(trial_id=tid, where=where, after_id=last)
            for r in rows:
                self.write(ser.ndjson(ser.trial_log(r, tid)))
                last = r.id
            if rows:
                await self.flush()
            elif done:
                break
            else:
                await logs.wait_for_more(1.0)
        self.finish()


class RunsStartHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(("runId",), runId=integer(0), checkpointStorage=ANY_OBJECT), body_required=True)
    def post(self) -> None:
        body = self.body_json()
        run_id = body["runId"]
        self.require_trial(run_id)
        self.authorize_trial(run_id)
        storage = body.get("checkpointStorage")
        self.send({"storageId": self.master.checkpoints.storage_id(storage)})


class RunMetadataHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA, "POST": Perm.UPDATE_EXPERIMENT_METADATA}
    allow_task = True

    @api()
    def get(self, run_id: str) -> None:
        rid = int(run_id)
        v = trial_view(self, rid)
        self.send({"metadata": v.row.run_metadata or {}})

    @api(body=obj(("metadata",), metadata=ANY_OBJECT, runId=integer()), body_required=True)
    def post(self, run_id: str) -> None:
        rid = int(run_id)
        trial_view(self, rid)
        metadata = self.body_json()["metadata"]
        self.master.trials.set_metadata(rid, metadata)
        self.send({"metadata": metadata})


_METRIC_TYPES = {"METRIC_TYPE_TRAINING": "training", "METRIC_TYPE_VALIDATION": "validation",
                 "METRIC_TYPE_PROFILING": "profiling"}


class TimeSeriesHandler(DetHandler):
    """``GET /api/v1/trials/time-series`` (0.38.1's CompareTrials): chosen metrics of several
    trials, downsampled in the database to ``maxDatapoints`` per trial — what charts need."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    # Under tornado's limits on a query (``_api.MAX_QUERY_FIELDS``, ``MAX_QUERY_BYTES``): 500
    # trials, 6 + 6 metrics (a name: 256 characters at most).
    @api(query=[Q("trialIds", "integer", many=True, minimum=0, required=True, max_items=500),
                Q("metricType", enum=tuple(METRIC_TYPES)), Q("group", max_length=64),
                Q("metricNames", many=True, max_items=6, max_length=256),
                Q("metricIds", many=True, max_items=6, max_length=321, pattern="^[^.]*\\.[\\s\\S]+$"),
                Q("maxDatapoints", "integer", minimum=0), Q("startBatches", "integer"), Q("endBatches", "integer")])
    def get(self) -> None:
        trial_ids = [int(x) for x in self.get_query_arguments("trialIds") if x]
        if not trial_ids:
            raise InvalidRequest("give between 1 and 500 trialIds")
        metric_type = self.get_query_argument("metricType", "")
        group = self.get_query_argument("group", "") or _METRIC_TYPES.get(metric_type, "training")
        wanted: dict[str, list[str]] = {}
        for name in self.get_query_arguments("metricNames"):
            wanted.setdefault(group, []).append(name)
        for mid in self.get_query_arguments("metricIds", strip=False):  # as declared: unstripped
            g, _, name = mid.partition(".")
            if not name:
                raise InvalidRequest(f"metricIds must look like group.name, got {mid!r}")
            wanted.setdefault(g, []).append(name)
        max_points = self.int_arg("maxDatapoints", 0) or 0
        start, end = self.int_arg("startBatches"), self.int_arg("endBatches")
        query = SeriesQuery(trial_ids, wanted, max_points, start, end)
        found = self.master.time_series.query(self.access, query)
        views, by_group = found.views, found.by_group
        types = {g: next((k for k, val in _METRIC_TYPES.items() if val == g), "METRIC_TYPE_UNSPECIFIED")
                 for g in by_group}
        out = []
        for v in views:
            metrics = ",".join(
                f'{{"group":{json.dumps(g)},"type":"{types[g]}","data":{series[v.row.id]}}}'
                for g, series in by_group.items()
            )
            trial = json.dumps(ser.trial(v.row, alloc_states=v.alloc_states), separators=(",", ":"))
            out.append(f'{{"trial":{trial},"metrics":[{metrics}]}}')
        self.send_text('{"trials":[' + ",".join(out) + "]}")
