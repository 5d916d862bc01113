"""Webhooks (Determined 0.38.1's): stored definitions, and the events that reach them.

A webhook is a URL, a type (DEFAULT: 0.38.1's event JSON; SLACK: a Slack message), a scope
(a workspace's, or global) and a mode (WORKSPACE: every experiment of its scope; SPECIFIC:
only experiments whose config names it under ``integrations.webhooks``), with triggers:

- ``EXPERIMENT_STATE_CHANGE`` ``{"state": "COMPLETED"}``: an experiment entered that state;
- ``METRIC_THRESHOLD_EXCEEDED`` ``{"metricName", "threshold", "compareOperator",
  "metricGroup"}``: a trial reported a metric past it, once per trial (0.38.1 stores this type
  but never fires it; the condition is ours);
- ``TASK_LOG`` ``{"regex": "..."}``: a task printed a matching line, once per task;
- ``CUSTOM``: a trial called ``core_context.alert()`` (``POST /api/v1/webhooks/custom``).

The hooks called where things happen (``on_state``, ``on_metrics``, ``alert``) only look at an
in-memory hint of which triggers exist and queue a small job; a builder thread reads what a
payload needs and hands signed bodies to the ``Shipper``'s senders. Log lines are not hooked:
while a TASK_LOG trigger exists the builder reads new lines from the store once a second.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ... import names as _names
from ...errors import Conflict, InvalidRequest, NotFound
from ...store import logs as log_store
from ...store import reader
from ...store import webhooks as store
from ..common.clock import Clock
from ..common.sealed import Sealer
from . import payloads as wp
from ._shipper import Delivery, Shipper, post

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig

log = logging.getLogger("det_jupyter.webhooks")
Webhook = wp.Webhook
LOG_POLL_S = 1.0
_LOG_BATCH = 2000
_SCANNED_CHARS = 8192  # of a log line, matched against patterns
_FIRED_HINTS_MAX = 10_000  # (trigger, trial) pairs remembered to skip the store's fire-once check
_HINTS_TTL_S = 30.0  # hints are re-read this often (a workspace's delete cascades to its webhooks)


class WebhookService:
    def __init__(self, engine: sa.Engine, clock: Clock, *, signing_key: str, sealer: Sealer | None = None,
                 resources: ResourceConfig | None = None, max_queue: int = 1000) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._key = signing_key
        self._sealer = sealer
        self.resources = resources  # a config's default pool's name
        self.shipper = Shipper(lambda: self._key, max_queue=max_queue)
        self._jobs: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=max_queue)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="det-webhook-builder", daemon=True)
        self._states: frozenset[str] = frozenset()  # states a state-change trigger names
        self._thresholds: tuple[wp.Trigger, ...] = ()
        self._log_patterns = False
        self._hints_at = 0.0
        self._log_cursor: int | None = None
        self._fired_here: set[tuple[int, str]] = set()  # metric thresholds this run already fired
        self.refresh_hints()

    # -- definitions ------------------------------------------------------------------------

    def list(self, workspaces: frozenset[int] | None, *, include_global: bool) -> list[Webhook]:
        """Webhooks of ``workspaces`` (None: all), and the global ones if ``include_global``."""
        return [h for h in self._load() if (h.workspace_id is None and include_global)
                or (h.workspace_id is not None and (workspaces is None or h.workspace_id in workspaces))]

    def get(self, webhook_id: int) -> Webhook:
        found = self._load(webhook_id)
        if not found:
            raise NotFound(f"webhook {webhook_id} not found")
        return found[0]

    def create(self, *, url: str, webhook_type: str, mode: str, name: str, workspace_id: int | None,
               triggers: list[dict[str, Any]]) -> Webhook:
        """Store a webhook (wire enums, as ``v1Webhook`` names them); InvalidRequest naming what
        is wrong, Conflict when its scope has one of that name."""
        kind = wp.WEBHOOK_TYPES.get(webhook_type)
        if kind is None:
            raise InvalidRequest(f"webhookType must be one of {', '.join(wp.WEBHOOK_TYPES)}, got {webhook_type!r}")
        stored_mode = {"": "WORKSPACE", "WEBHOOK_MODE_UNSPECIFIED": "WORKSPACE", **wp.MODES}.get(mode or "")
        if stored_mode is None:
            raise InvalidRequest(f"mode must be one of {', '.join(wp.MODES)}, got {mode!r}")
        name = _names.check_text("webhook name", name, max_len=255, empty=False)
        url = wp.check_url(url)
        checked = wp.check_triggers(triggers, stored_mode)
        with self._engine.begin() as conn:
            if store.name_taken(conn, name, workspace_id):
                where = "global webhooks" if workspace_id is None else f"workspace {workspace_id}"
                raise Conflict(f"a webhook named {name!r} already exists among {where}")
            # The URL is sealed for the id the row gets, so it is written once the row exists.
            hook_id = store.insert(conn, name=name, url="", webhook_type=kind, mode=stored_mode,
                                   workspace_id=workspace_id, created_at=self._clock.now())
            store.set_url(conn, hook_id, self._seal(hook_id, url))
            store.insert_triggers(conn, hook_id, checked)
        self.refresh_hints()
        return self.get(hook_id)

    def delete(self, webhook_id: int) -> None:
        with self._engine.begin() as conn:
            if not store.delete(conn, webhook_id):
                raise NotFound(f"webhook {webhook_id} not found")
        self.refresh_hints()

    def set_url(self, webhook_id: int, url: str) -> None:
        """``PATCH /api/v1/webhooks/{id}``: 0.38.1 changes only a webhook's URL."""
        url = wp.check_url(url)
        with self._engine.begin() as conn:
            if not store.set_url(conn, webhook_id, self._seal(webhook_id, url)):
                raise NotFound(f"webhook {webhook_id} not found")

    def test(self, hook: Webhook, timeout_s: float = 10.0) -> None:
        """Send ``hook`` a test event now, once (0.38.1: DEFAULT signed, SLACK not); blocks, so
        call it off the event loop. InvalidRequest saying why when it does not land."""
        now = self._clock.now()
        if hook.webhook_type == "SLACK":
            body, key = wp.go_json(wp.SLACK_TEST), None
        else:
            body, key = wp.go_json(wp.test_event(str(uuid.uuid4()), int(now))), self._key
        try:
            status = post(hook.url, body, key, timeout_s)
        except OSError as exc:
            raise InvalidRequest(f"could not reach webhook {hook.id}'s URL: {exc}") from None
        if status >= 300:
            raise InvalidRequest(f"webhook {hook.id}'s receiver answered HTTP {status} to the test event")

    def _seal(self, hook_id: int, url: str) -> str:
        return self._sealer.seal(url, f"webhook:{hook_id}:url") if self._sealer else url

    def _load(self, webhook_id: int | None = None) -> list[Webhook]:
        with self._reader.connect() as conn:
            rows, trigs = store.load(conn, webhook_id)
        by_hook: dict[int, list[wp.Trigger]] = {}
        for r in trigs:
            by_hook.setdefault(r.webhook_id, []).append(wp.Trigger(r.id, r.trigger_type, r.condition or {}, r.webhook_id))
        return [Webhook(r.id, r.name, self._sealer.open(r.url, f"webhook:{r.id}:url") if self._sealer else r.url,
                        r.webhook_type, r.mode, r.workspace_id, tuple(by_hook.get(r.id, ())))
                for r in rows]

    def refresh_hints(self) -> None:
        """Re-read which triggers exist (the hooks' fast path: nothing to do without any)."""
        triggers = [trig for hook in self._load() for trig in hook.triggers]
        self._states = frozenset(str(trig.condition.get("state")) for trig in triggers
                                 if trig.trigger_type == wp.STATE_CHANGE)
        self._thresholds = tuple(trig for trig in triggers if trig.trigger_type == wp.METRIC)
        patterns = any(trig.trigger_type == wp.TASK_LOG for trig in triggers)
        if patterns and not self._log_patterns:
            with self._reader.connect() as conn:  # the first pattern looks at lines from now on
                self._log_cursor = log_store.max_id(conn)
        self._log_patterns = patterns
        self._hints_at = time.monotonic()

    # -- hooks where things happen (cheap; never raise) -----------------------------------------

    def on_state(self, conn: sa.Connection, exp_id: int, state: str) -> None:
        """An experiment's state is being set in ``conn``'s transaction: once it commits, the
        state-change triggers naming ``state`` fire."""
        if state not in self._states:
            return
        at = self._clock.now()
        sa.event.listen(conn, "commit", lambda _conn: self._queue(("state", exp_id, state, at)), once=True)

    def on_metrics(self, trial_id: int, reports: Iterable[Any]) -> None:
        """A trial reported metrics (``metrics.Report``s): thresholds they cross fire."""
        for trig in self._thresholds:
            for report in reports:
                value = wp.crossed(trig.condition, report.group, report.metrics)
                if value is not None and (trig.id, f"trial:{trial_id}") not in self._fired_here:
                    if len(self._fired_here) >= _FIRED_HINTS_MAX:  # only a hint: the store's
                        self._fired_here.clear()  # fire_once record decides, so forgetting is safe
                    self._fired_here.add((trig.id, f"trial:{trial_id}"))
                    self._queue(("metric", trig, trial_id, value, report.steps_completed))
                    break

    def alert(self, exp_id: int, trial_id: int | None, title: str, description: str, level: str) -> None:
        """``core_context.alert()``: the CUSTOM triggers of the webhooks the experiment names."""
        data = {"title": title, "description": description, "level": wp.LEVELS.get(level, "UNSPECIFIED")}
        self._queue(("alert", exp_id, trial_id, data))

    def _queue(self, job: tuple[Any, ...]) -> None:
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            log.error("webhook event queue full: a %s event was dropped", job[0])

    # -- the builder thread ---------------------------------------------------------------------

    def start(self) -> None:
        self.shipper.start()
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self._jobs.put_nowait(None)
        except queue.Full:
            pass
        if self._thread.is_alive():
            self._thread.join(2.0)
        self.shipper.stop()

    def _run(self) -> None:
        next_scan = 0.0
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=LOG_POLL_S)
            except queue.Empty:
                job = ()
            if job is None:
                return
            try:
                if job:
                    self._build(job)
                if time.monotonic() - self._hints_at > _HINTS_TTL_S:
                    self.refresh_hints()
                if self._log_patterns and time.monotonic() >= next_scan:
                    next_scan = time.monotonic() + LOG_POLL_S
                    self._scan_logs()
            except Exception:  # a bug of ours, or the store down for now: log, go on
                log.exception("webhook event %s could not be built", job[0] if job else "log scan")

    def _build(self, job: tuple[Any, ...]) -> None:
        kind = job[0]
        hooks = self._load()
        if kind == "state":
            _, exp_id, state, at = job
            exp = self._experiment(exp_id)
            if exp is None:
                return
            end = at if state in ("COMPLETED", "CANCELED", "ERROR") else None
            for hook in hooks:
                for trig in hook.triggers:
                    if (trig.trigger_type == wp.STATE_CHANGE and trig.condition.get("state") == state
                            and wp.reaches(hook, exp.selection, exp.workspace_id)):
                        self._send_experiment(hook, exp, state, wp.STATE_CHANGE, {"state": state}, end_time=end)
        elif kind == "alert":
            _, exp_id, trial_id, data = job
            exp = self._experiment(exp_id)
            if exp is None:
                return
            state = self._state_of(exp_id)
            for hook in wp.alert_targets(hooks, exp.selection, exp.workspace_id):
                for trig in hook.triggers:
                    if trig.trigger_type == wp.CUSTOM:
                        self._send_experiment(hook, exp, state, wp.CUSTOM, {"state": state}, end_time=None,
                                              trial_id=trial_id, custom=data)
        elif kind == "metric":
            _, trig, trial_id, value, steps = job
            hook = next((h for h in hooks if h.id == trig.webhook_id), None)
            exp_id = self.experiment_of_trial(trial_id)
            exp = self._experiment(exp_id) if exp_id is not None else None
            if hook is None or exp is None or not wp.reaches(hook, exp.selection, exp.workspace_id):
                return
            if not self._first_time(trig.id, f"trial:{trial_id}"):
                return
            cond = dict(trig.condition)
            data = {"metric": {"name": cond["metricName"], "group": cond["metricGroup"], "value": value,
                               "steps_completed": steps}}
            self._send_experiment(hook, exp, self._state_of(exp.id), wp.METRIC, cond, end_time=None,
                                  trial_id=trial_id, extra=data,
                                  message=wp.metric_message(trial_id, cond, value, steps))

    def _send_experiment(self, hook: Webhook, exp: wp.ExperimentFacts, state: str, event_type: str,
                         condition: dict[str, Any], *, end_time: float | None, trial_id: int | None = None,
                         custom: dict[str, str] | None = None, extra: dict[str, Any] | None = None,
                         message: str | None = None) -> None:
        now = self._clock.now()
        if hook.webhook_type == "SLACK":
            body = wp.slack_experiment(exp, state, now, end_time=end_time, trial_id=trial_id, custom=custom,
                                       message=message)
        else:
            data: dict[str, Any] = {"experiment": wp.experiment_data(exp, state, end_time=end_time, trial_id=trial_id)}
            if custom is not None:
                data["custom_data"] = custom
            data.update(extra or {})
            body = wp.event(str(uuid.uuid4()), event_type, int(now), condition, data)
        self.shipper.submit(Delivery(hook.url, wp.go_json(body),
                                     f"webhook {hook.id} ({event_type} of experiment {exp.id})"))

    # -- what payloads need from the store ------------------------------------------------------

    def _experiment(self, exp_id: int) -> wp.ExperimentFacts | None:
        with self._reader.connect() as conn:
            row = store.experiment(conn, exp_id)
        if row is None:
            return None
        config = row.config or {}
        res = config.get("resources") or {}
        slots = int(res.get("slots_per_trial", 1) or 0)
        pool = res.get("resource_pool") or ""
        if self.resources is not None:
            pool = self.resources.pool_for(pool, slots)
        return wp.ExperimentFacts(
            id=row.id, name=str(config.get("name") or ""), start_time=row.start_time, resource_pool=pool,
            slots_per_trial=slots, workspace_id=row.ws_id, workspace=row.ws, project=row.project,
            selection=wp.selection(config))

    def _state_of(self, exp_id: int) -> str:
        with self._reader.connect() as conn:
            return store.experiment_state(conn, exp_id) or ""

    def experiment_of_trial(self, trial_id: int) -> int | None:
        with self._reader.connect() as conn:
            return store.experiment_of_trial(conn, trial_id)

    def _first_time(self, trigger_id: int, subject: str) -> bool:
        """Record that a once-per-subject trigger fired; False when it already had."""
        with self._engine.begin() as conn:
            return store.fire_once(conn, trigger_id, subject, self._clock.now())

    # -- log patterns ---------------------------------------------------------------------------

    def _scan_logs(self) -> None:
        """Match the lines stored since the last scan against the TASK_LOG triggers."""
        if self._log_cursor is None:
            return
        with self._reader.connect() as conn:
            rows = log_store.lines_after(conn, self._log_cursor, _LOG_BATCH)
        if not rows:
            return
        self._log_cursor = rows[-1].id
        patterns = [(hook, trig, re.compile(str(trig.condition.get("regex", ""))))
                    for hook in self._load() for trig in hook.triggers if trig.trigger_type == wp.TASK_LOG]
        where: dict[str, tuple[int, wp.Selection | None, tuple[int, int] | None, str] | None] = {}
        for row in rows:
            text = row.log[:_SCANNED_CHARS].rstrip("\n")
            if row.agent_id is None or wp.CONFIG_LINE.search(text):
                continue  # the master's own lines; a config dump, which holds the patterns
            for hook, trig, regex in patterns:
                if not regex.search(text):
                    continue
                if row.task_id not in where:
                    where[row.task_id] = self._task_scope(row.task_id, row.trial_id)
                scope = where[row.task_id]
                if scope is None or not wp.reaches(hook, scope[1], scope[0]):
                    continue
                if not self._first_time(trig.id, f"task:{row.task_id}"):
                    continue
                self._send_log(hook, trig, row.task_id, row.agent_id, text, scope)

    def _task_scope(self, task_id: str, trial_id: int | None) -> tuple[int, wp.Selection | None, tuple[int, int] | None, str] | None:
        """(workspace, the experiment's selection or None, (experiment, trial) or None, task type)."""
        if trial_id is not None:
            exp_id = self.experiment_of_trial(trial_id)
            exp = self._experiment(exp_id) if exp_id is not None else None
            return None if exp is None else (exp.workspace_id, exp.selection, (exp.id, trial_id), "TRIAL")
        with self._reader.connect() as conn:
            row = store.task_scope(conn, task_id)
        return None if row is None else (row.workspace_id, None, None, row.task_type)

    def _send_log(self, hook: Webhook, trig: wp.Trigger, task_id: str, node: str, line: str,
                  scope: tuple[int, wp.Selection | None, tuple[int, int] | None, str]) -> None:
        regex = str(trig.condition.get("regex"))
        if hook.webhook_type == "SLACK":
            body = wp.slack_task_log(task_id=task_id, node=node, line=line, regex=regex, trial=scope[2],
                                     task_type=scope[3])
        else:
            body = wp.event(str(uuid.uuid4()), wp.TASK_LOG, int(self._clock.now()), {"regex": regex},
                            {"task_log": {"task_id": task_id, "node_name": node, "triggering_log": line}})
        self.shipper.submit(Delivery(hook.url, wp.go_json(body), f"webhook {hook.id} (TASK_LOG of task {task_id})"))
