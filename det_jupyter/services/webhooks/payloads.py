"""Webhooks, the pure part: what a webhook is, which ones an event reaches, the bodies sent,
and how they are signed — as Determined 0.38.1 does (``master/internal/webhooks``).

Nothing here reads the database, the clock or the network: callers pass the facts, the time
and the event id in, so every function is checked by exact-value tests.

Signing (0.38.1's ``generateWebhookRequest``): the body is sent with
``X-Determined-AI-Signature-Timestamp: <unix seconds>`` and
``X-Determined-AI-Signature: hex(HMAC-SHA256(key, "<timestamp>,<body>"))``, the key being the
signing key's text as bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ...errors import InvalidRequest

# -- names on the wire and as stored ----------------------------------------------------------

#: v1TriggerType (wire) -> 0.38.1's stored name, which is also a payload's ``event_type``.
TRIGGER_TYPES = {
    "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE": "EXPERIMENT_STATE_CHANGE",
    "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED": "METRIC_THRESHOLD_EXCEEDED",
    "TRIGGER_TYPE_TASK_LOG": "TASK_LOG",
    "TRIGGER_TYPE_CUSTOM": "CUSTOM",
}
WEBHOOK_TYPES = {"WEBHOOK_TYPE_DEFAULT": "DEFAULT", "WEBHOOK_TYPE_SLACK": "SLACK"}
MODES = {"WEBHOOK_MODE_WORKSPACE": "WORKSPACE", "WEBHOOK_MODE_SPECIFIC": "SPECIFIC"}
STATE_CHANGE, METRIC, TASK_LOG, CUSTOM = "EXPERIMENT_STATE_CHANGE", "METRIC_THRESHOLD_EXCEEDED", "TASK_LOG", "CUSTOM"
#: The experiment states a state-change trigger may name (stored form, no ``STATE_`` prefix).
STATES = ("ACTIVE", "PAUSED", "STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED",
          "STOPPING_ERROR", "COMPLETED", "CANCELED", "ERROR")
#: v1LogLevel -> the level an alert's payload names (0.38.1's ``TaskLogLevelFromProto``).
LEVELS = {"LOG_LEVEL_TRACE": "TRACE", "LOG_LEVEL_DEBUG": "DEBUG", "LOG_LEVEL_INFO": "INFO",
          "LOG_LEVEL_WARNING": "WARNING", "LOG_LEVEL_ERROR": "ERROR", "LOG_LEVEL_CRITICAL": "CRITICAL"}
#: A metric threshold's comparisons (0.38.1 stores the trigger type but never fires it; this
#: condition is ours): ``{"metricName", "threshold", "compareOperator", "metricGroup"}``.
OPERATORS = {"GREATER_THAN": lambda v, t: v > t, "GREATER_THAN_OR_EQUAL": lambda v, t: v >= t,
             "LESS_THAN": lambda v, t: v < t, "LESS_THAN_OR_EQUAL": lambda v, t: v <= t}
METRIC_GROUPS = ("validation", "training")
MAX_REGEX = 1024
#: A config dump's line (0.38.1's ``ExpconfigCompiledRegex``): never scanned by log triggers,
#: since the config that holds a trigger's pattern would match it.
CONFIG_LINE = re.compile(r'"log_policies":')


@dataclass(frozen=True)
class Trigger:
    id: int
    trigger_type: str  # stored form: EXPERIMENT_STATE_CHANGE, ...
    condition: Mapping[str, Any]
    webhook_id: int


@dataclass(frozen=True)
class Webhook:
    id: int
    name: str
    url: str
    webhook_type: str  # DEFAULT | SLACK
    mode: str  # WORKSPACE | SPECIFIC
    workspace_id: int | None  # None: global
    triggers: tuple[Trigger, ...] = ()


@dataclass(frozen=True)
class Selection:
    """An experiment config's ``integrations.webhooks`` (0.38.1's WebhooksConfigV0)."""

    webhook_ids: tuple[int, ...] = ()
    webhook_names: tuple[str, ...] = ()
    exclude: bool = False


@dataclass(frozen=True)
class ExperimentFacts:
    """What a payload tells about an experiment."""

    id: int
    name: str
    start_time: float
    resource_pool: str
    slots_per_trial: int
    workspace_id: int
    workspace: str
    project: str
    selection: Selection


# -- checking a new webhook -------------------------------------------------------------------


#: What a webhook's URL may be (the API document's pattern; ``check_url`` takes more).
URL_PATTERN = r"^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?([/?#][!-~]*)?$"


def check_url(url: object) -> str:
    """An http(s) URL with a host, else InvalidRequest naming it."""
    try:
        parts = urlsplit(url.strip()) if isinstance(url, str) else None
        ok = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok or any(c.isspace() for c in str(url).strip()):
        raise InvalidRequest(f"url must be an http:// or https:// URL with a host, got {str(url)[:200]!r}")
    return str(url).strip()


def check_triggers(triggers: list[dict[str, Any]], mode: str) -> list[tuple[str, dict[str, Any]]]:
    """Each trigger as (stored type, condition), as 0.38.1's ``PostWebhook`` checks them, and
    more: a state change names a state, a metric threshold a metric and a number."""
    if not triggers:
        raise InvalidRequest("a webhook needs at least one trigger (triggers: [{triggerType, condition}])")
    out = []
    for i, trig in enumerate(triggers):
        where = f"triggers[{i}]"
        wire = trig.get("triggerType")
        kind = TRIGGER_TYPES.get(wire or "")
        if kind is None:
            raise InvalidRequest(f"{where}.triggerType must be one of {', '.join(TRIGGER_TYPES)}, got {wire!r}")
        cond = trig.get("condition") or {}
        if not isinstance(cond, dict):
            raise InvalidRequest(f"{where}.condition must be an object")
        out.append((kind, _check_condition(kind, dict(cond), mode, where)))
    return out


def slow_regex(pattern: str) -> str | None:
    """Why ``pattern`` (already compiled once) could take a line exponential time, or None: a
    repetition inside a repetition (``(a+)+``, ``(.*x)*``), a repeated alternation of
    repetitions, or a backreference. The master scans every task's log lines with it."""
    try:
        import re._parser as sre  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse as sre  # type: ignore[no-redef]
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)} - {None}

    def walk(items: Any, inside: bool) -> str | None:
        for op, arg in items:
            if op in (sre.GROUPREF, getattr(sre, "GROUPREF_EXISTS", None)):
                return "has a backreference"
            if op in repeats:
                low, high, sub = arg
                if inside and high != low:
                    return "nests one repetition inside another"
                found = walk(sub, inside or high > 1)
                if found:
                    return found
            elif op == sre.SUBPATTERN:
                found = walk(arg[-1], inside)
                if found:
                    return found
            elif op == sre.BRANCH:
                firsts = [b[0][1] if b and b[0][0] == sre.LITERAL else None for b in arg[1]]
                if inside and (None in firsts or len(set(firsts)) < len(firsts)):
                    return "repeats alternatives that can match the same text"
                for branch in arg[1]:
                    found = walk(branch, inside)
                    if found:
                        return found
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                found = walk(arg[1], inside)
                if found:
                    return found
        return None

    return walk(sre.parse(pattern), False)


def _check_condition(kind: str, cond: dict[str, Any], mode: str, where: str) -> dict[str, Any]:
    if kind == STATE_CHANGE:
        state = cond.get("state")
        if state not in STATES:
            raise InvalidRequest(f"{where}.condition.state must be an experiment state "
                                 f"({', '.join(STATES)}), got {state!r}")
    elif kind == TASK_LOG:
        regex = cond.get("regex")
        if len(cond) != 1 or not isinstance(regex, str):
            raise InvalidRequest(f"{where}: a TASK_LOG trigger's condition is exactly {{\"regex\": \"...\"}}, "
                                 f"got {json.dumps(cond)[:200]}")
        if len(regex) > MAX_REGEX:
            raise InvalidRequest(f"{where}.condition.regex is longer than {MAX_REGEX} characters")
        try:
            re.compile(regex)
        except re.error as exc:
            raise InvalidRequest(f"{where}.condition.regex is not a valid regular expression: {exc}") from None
        slow = slow_regex(regex)
        if slow:
            raise InvalidRequest(f"{where}.condition.regex {slow}: Python's regular expressions can take "
                                 "exponential time on such a pattern; write it without that")
    elif kind == CUSTOM:
        if mode != "SPECIFIC":
            raise InvalidRequest(f"{where}: a CUSTOM trigger only works on a webhook with mode "
                                 "WEBHOOK_MODE_SPECIFIC")
    elif kind == METRIC:
        return check_threshold(cond, where)
    return cond


def check_threshold(cond: dict[str, Any], where: str = "condition") -> dict[str, Any]:
    """A metric threshold's condition with its defaults filled (GREATER_THAN, validation)."""
    name, threshold = cond.get("metricName"), cond.get("threshold")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"{where}: a METRIC_THRESHOLD_EXCEEDED trigger names its metric "
                             "(condition.metricName)")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise InvalidRequest(f"{where}.condition.threshold must be a finite number, got {threshold!r}")
    op = cond.get("compareOperator") or "GREATER_THAN"
    if op not in OPERATORS:
        raise InvalidRequest(f"{where}.condition.compareOperator must be one of {', '.join(OPERATORS)}, got {op!r}")
    group = cond.get("metricGroup") or "validation"
    if group not in METRIC_GROUPS:
        raise InvalidRequest(f"{where}.condition.metricGroup must be one of {', '.join(METRIC_GROUPS)}, got {group!r}")
    return {"metricName": name, "threshold": threshold, "compareOperator": op, "metricGroup": group}


# -- which webhooks an event reaches ----------------------------------------------------------


def selection(config: Mapping[str, Any] | None) -> Selection:
    """``integrations.webhooks`` of an experiment's config (entries of the wrong type are
    ignored: the config check is where they are refused)."""
    integ = (config or {}).get("integrations") or {}
    hooks = integ.get("webhooks") if isinstance(integ, Mapping) else None
    if not isinstance(hooks, Mapping):
        return Selection()
    ids = hooks.get("webhook_id") or []
    names = hooks.get("webhook_name") or []
    return Selection(
        webhook_ids=tuple(i for i in ids if isinstance(i, int) and not isinstance(i, bool)) if isinstance(ids, list) else (),
        webhook_names=tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else (),
        exclude=hooks.get("exclude") is True,
    )


def reaches(hook: Webhook, sel: Selection | None, workspace_id: int) -> bool:
    """Whether an event of a task in ``workspace_id`` (an experiment's, with its ``sel``; None
    for a task that is no experiment's) reaches ``hook`` (0.38.1's ``matchWebhook``): an
    excluded experiment reaches none; a workspace's webhook only its own tasks; a SPECIFIC one
    only experiments that name it by id or name."""
    if sel is not None and sel.exclude:
        return False
    if hook.workspace_id is not None and hook.workspace_id != workspace_id:
        return False
    if hook.mode == "SPECIFIC":
        return sel is not None and (hook.id in sel.webhook_ids or hook.name in sel.webhook_names)
    return True


def alert_targets(hooks: Iterable[Webhook], sel: Selection, workspace_id: int) -> list[Webhook]:
    """The webhooks a custom alert of an experiment goes to (0.38.1's
    ``handleCustomTriggerData``): only those its config names, by id (global or of its
    workspace) or by name (its workspace's, else a global one of that name); none when it is
    excluded."""
    if sel.exclude:
        return []
    hooks = list(hooks)
    out: dict[int, Webhook] = {}
    for hook in hooks:
        if hook.id in sel.webhook_ids and hook.workspace_id in (None, workspace_id):
            out[hook.id] = hook
    for name in sel.webhook_names:
        named = [h for h in hooks if h.name == name and h.workspace_id in (None, workspace_id)]
        named.sort(key=lambda h: h.workspace_id is None)  # the workspace's own first
        if named:
            out.setdefault(named[0].id, named[0])
    return list(out.values())


def crossed(cond: Mapping[str, Any], group: str, metrics: Mapping[str, Any]) -> float | None:
    """The value of a report (``group``'s ``metrics``) that is past a metric threshold's
    condition, or None."""
    if cond.get("metricGroup", "validation") != group:
        return None
    value = metrics.get(cond.get("metricName"))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    op = OPERATORS.get(cond.get("compareOperator") or "GREATER_THAN")
    return float(value) if op is not None and op(value, cond["threshold"]) else None


# -- bodies -----------------------------------------------------------------------------------


def go_json(obj: Any) -> bytes:
    """JSON as Go's ``encoding/json`` writes it: compact, UTF-8, and ``<``, ``>``, ``&``,
    U+2028 and U+2029 escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                     ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text.encode()


def experiment_data(exp: ExperimentFacts, state: str, *, end_time: float | None,
                    trial_id: int | None = None) -> dict[str, Any]:
    """0.38.1's ExperimentPayload: ``duration`` in whole seconds once the experiment ended."""
    out: dict[str, Any] = {
        "id": exp.id, "state": state, "name": exp.name,
        "duration": int(end_time - exp.start_time) if end_time is not None else 0,
        "resource_pool": exp.resource_pool, "slots_per_trial": exp.slots_per_trial,
        "workspace": exp.workspace, "project": exp.project,
    }
    if trial_id:
        out["trial_id"] = trial_id
    return out


def event(event_id: str, event_type: str, ts: int, condition: Mapping[str, Any],
          data: Mapping[str, Any]) -> dict[str, Any]:
    """0.38.1's EventPayload (a DEFAULT webhook's body)."""
    return {"event_id": event_id, "event_type": event_type, "timestamp": ts,
            "condition": dict(condition), "event_data": dict(data)}


def test_event(event_id: str, ts: int) -> dict[str, Any]:
    """What ``POST /api/v1/webhooks/{id}/test`` sends a DEFAULT webhook."""
    return event(event_id, STATE_CHANGE, ts, {"state": "COMPLETED"}, {"data": "test"})


SLACK_TEST = {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}


def _field(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def slack_experiment(exp: ExperimentFacts, state: str, now: float, *, end_time: float | None,
                     trial_id: int | None = None, custom: Mapping[str, str] | None = None,
                     message: str | None = None) -> dict[str, Any]:
    """0.38.1's ``generateSlackPayload``: the experiment's status as a message, and a coloured
    attachment with its name, status, duration, workspace, project (and trial). ``custom``: an
    alert's level, title and description, as fields of the message; ``message``: the text in
    place of the status line (a metric threshold's)."""
    if state == "COMPLETED":
        status, mark, color, shown = "Your experiment completed successfully 🎉", "✅ ", "#13B670", "Completed"
    elif state == "ERROR":
        status, mark, color, shown = "Your experiment has stopped with errors", "❌ ", "#DD5040", "Errored"
    else:
        status, mark, color, shown = f"The status of your experiment is {state}", "", "#009bde", state
    seconds = max(0.0, (end_time if end_time is not None else now) - exp.start_time)
    hours, rest = divmod(seconds / 3600.0, 1.0)
    fields = [_field(f"*Status*: {shown}"), _field(f"*Duration*: {int(hours)}h {int(rest * 60)}min")]
    if exp.workspace:
        fields.append(_field(f"*Workspace*: {exp.workspace}"))
    if exp.project:
        fields.append(_field(f"*Project*: {exp.project}"))
    if trial_id:
        fields.append(_field(f"*Trial ID*: {trial_id}"))
    head: dict[str, Any] = {"type": "section", "text": {"type": "plain_text", "text": message or status}}
    if custom is not None:
        head["fields"] = [_field(f"*Level*: {custom['level']}"), _field(f"*Title*: {custom['title']}"),
                          _field(f"*Description*: {custom['description']}")]
    body = {"type": "section", "text": _field(f"{mark}{exp.name} (#{exp.id})"), "fields": fields}
    return {"blocks": [head], "attachments": [{"color": color, "blocks": [body]}]}


def slack_task_log(*, task_id: str, node: str, line: str, regex: str, trial: tuple[int, int] | None,
                   task_type: str = "") -> dict[str, Any]:
    """0.38.1's ``generateLogPatternSlackPayload``; ``trial``: (experiment id, trial id) of a
    trial's task."""
    if trial is not None:
        exp_id, trial_id = trial
        text = (f"Experiment ID `{exp_id}`, Trial ID `{trial_id}`, running on node `{node}`, reported a log\n"
                f"```{line}```\nThis log matched the regex\n```{regex}```\n"
                f"View full logs at /det/experiments/{exp_id}/trials/{trial_id}/logs")
    else:
        text = (f"Task ID `{task_id}`, task type `{task_type}`, running on node `{node}`, reported a log\n"
                f"```{line}```\nThis log matched the regex\n```{regex}```\n")
    return {"blocks": [{"type": "section", "text": _field(text)}]}


def metric_message(trial_id: int, cond: Mapping[str, Any], value: float, steps: int) -> str:
    op = str(cond["compareOperator"]).lower().replace("_", " ")
    return (f"Trial {trial_id} reported {cond['metricGroup']} metric {cond['metricName']} = {value:g} "
            f"at step {steps}: {op} {cond['threshold']}")


# -- signing ------------------------------------------------------------------------------------


def signature(key: str, ts: int, body: bytes) -> str:
    """0.38.1's ``generateSignedPayload``: hex HMAC-SHA256 of ``"<ts>,<body>"`` under the key."""
    return hmac.new(key.encode(), str(ts).encode() + b"," + body, hashlib.sha256).hexdigest()


def headers(key: str | None, ts: int, body: bytes) -> dict[str, str]:
    """A delivery's headers: signed unless ``key`` is None (0.38.1's Slack test is not)."""
    out = {"Content-Type": "application/json; charset=UTF-8"}
    if key is not None:
        out["X-Determined-AI-Signature-Timestamp"] = str(ts)
        out["X-Determined-AI-Signature"] = signature(key, ts, body)
    return out


def backoff_delays(attempts: int, first_s: float, factor: float = 2.0, cap_s: float = 60.0) -> list[float]:
    """The waits before each retry of ``attempts`` tries in all."""
    if attempts < 1 or first_s < 0 or factor < 1:
        raise ValueError(f"attempts >= 1, first_s >= 0 and factor >= 1 needed, got {attempts}, {first_s}, {factor}")
    return [min(cap_s, first_s * factor ** i) for i in range(attempts - 1)]
