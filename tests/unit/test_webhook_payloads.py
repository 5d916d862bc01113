"""Webhooks, the pure part (services._webhook_payloads): checks, matching, bodies, signatures."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.webhooks import payloads as wp

EXP = wp.ExperimentFacts(id=7, name="mnist", start_time=1000.0, resource_pool="default", slots_per_trial=1,
                         workspace_id=2, workspace="team", project="vision", selection=wp.Selection())


def _hook(id_: int = 1, *, name: str = "h", mode: str = "WORKSPACE", ws: int | None = None) -> wp.Webhook:
    return wp.Webhook(id_, name, "http://x/", "DEFAULT", mode, ws)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "https://hooks.slack.com/services/T/B/x",
                                 "http://a", " http://a/b?c=d "])
def test_http_urls_are_taken(url: str) -> None:
    assert wp.check_url(url) == url.strip()


@pytest.mark.parametrize("url", ["ftp://a/b", "http://", "hooks.slack.com/x", "", "http://a b/", "http://[zz]/", 3])
def test_other_urls_are_refused_naming_the_url(url: object) -> None:
    with pytest.raises(InvalidRequest, match="url must be an http:// or https:// URL"):
        wp.check_url(url)  # type: ignore[arg-type]


def test_every_url_the_document_allows_is_taken() -> None:
    import re

    for url in ("http://a", "https://a.b-c_d~e:65535/x?y#z", "http://0:1", "http://a/%20"):
        assert re.search(wp.URL_PATTERN, url) and wp.check_url(url) == url


@pytest.mark.parametrize("triggers,mode,message", [
    ([], "WORKSPACE", "at least one trigger"),
    ([{"triggerType": "TRIGGER_TYPE_FOO"}], "WORKSPACE", r"triggers\[0\].triggerType must be one of"),
    ([{"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "DONE"}}], "WORKSPACE",
     r"condition.state must be an experiment state"),
    ([{"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "STATE_COMPLETED"}}],
     "WORKSPACE", "must be an experiment state"),
    ([{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "("}}], "WORKSPACE",
     "not a valid regular expression"),
    ([{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "a", "b": 1}}], "WORKSPACE",
     "exactly"),
    ([{"triggerType": "TRIGGER_TYPE_CUSTOM"}], "WORKSPACE", "WEBHOOK_MODE_SPECIFIC"),
    ([{"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED", "condition": {"threshold": 1}}], "WORKSPACE",
     "metricName"),
    ([{"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED",
       "condition": {"metricName": "loss", "threshold": "1"}}], "WORKSPACE", "threshold must be a finite number"),
    ([{"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED",
       "condition": {"metricName": "loss", "threshold": 1, "compareOperator": ">"}}], "WORKSPACE",
     "compareOperator must be one of"),
])
def test_bad_triggers_are_refused_naming_what_is_wrong(triggers: list, mode: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        wp.check_triggers(triggers, mode)


def test_good_triggers_are_stored_by_their_stored_names_with_defaults() -> None:
    got = wp.check_triggers([
        {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "COMPLETED"}},
        {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "CUDA out of memory"}},
        {"triggerType": "TRIGGER_TYPE_CUSTOM"},
        {"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED", "condition": {"metricName": "loss", "threshold": 2}},
    ], "SPECIFIC")
    assert got == [
        ("EXPERIMENT_STATE_CHANGE", {"state": "COMPLETED"}),
        ("TASK_LOG", {"regex": "CUDA out of memory"}),
        ("CUSTOM", {}),
        ("METRIC_THRESHOLD_EXCEEDED", {"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN",
                                       "metricGroup": "validation"}),
    ]


def test_selection_reads_integrations_webhooks_and_ignores_wrong_types() -> None:
    cfg = {"integrations": {"webhooks": {"webhook_id": [3, "4", True], "webhook_name": ["a", 5], "exclude": False}}}
    assert wp.selection(cfg) == wp.Selection((3,), ("a",), False)
    assert wp.selection({"integrations": {"webhooks": {"exclude": True}}}).exclude
    assert wp.selection({}) == wp.selection({"integrations": None}) == wp.Selection()


@pytest.mark.parametrize("hook,sel,ws,reached", [
    (_hook(), wp.Selection(), 2, True),  # global, workspace mode: everything
    (_hook(), None, 2, True),  # ... tasks that are no experiment's too
    (_hook(), wp.Selection(exclude=True), 2, False),  # excluded: nothing
    (_hook(ws=2), wp.Selection(), 2, True),
    (_hook(ws=3), wp.Selection(), 2, False),  # another workspace's
    (_hook(mode="SPECIFIC"), wp.Selection(), 2, False),  # not named
    (_hook(mode="SPECIFIC"), None, 2, False),
    (_hook(mode="SPECIFIC", name="n"), wp.Selection(webhook_names=("n",)), 2, True),
    (_hook(5, mode="SPECIFIC"), wp.Selection(webhook_ids=(5,)), 2, True),
    (_hook(5, mode="SPECIFIC", ws=3), wp.Selection(webhook_ids=(5,)), 2, False),
])
def test_which_webhooks_an_event_reaches(hook: wp.Webhook, sel: wp.Selection | None, ws: int, reached: bool) -> None:
    assert wp.reaches(hook, sel, ws) is reached


def test_alerts_go_only_to_webhooks_the_config_names() -> None:
    hooks = [_hook(1, name="a"), _hook(2, name="b", ws=2), _hook(3, name="b"), _hook(4, name="c", ws=9),
             _hook(5, name="d", ws=9)]
    sel = wp.Selection(webhook_ids=(1, 5), webhook_names=("b", "c"))
    # 1 by id (global); 5 is another workspace's; "b": the workspace's own before the global
    # one; "c" is only another workspace's.
    assert [h.id for h in wp.alert_targets(hooks, sel, 2)] == [1, 2]
    assert wp.alert_targets(hooks, wp.Selection(webhook_ids=(1,), exclude=True), 2) == []


@pytest.mark.parametrize("cond,group,metrics,value", [
    ({"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN", "metricGroup": "validation"},
     "validation", {"loss": 3}, 3.0),
    ({"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN", "metricGroup": "validation"},
     "validation", {"loss": 2}, None),
    ({"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN_OR_EQUAL", "metricGroup": "validation"},
     "validation", {"loss": 2}, 2.0),
    ({"metricName": "acc", "threshold": 0.5, "compareOperator": "LESS_THAN", "metricGroup": "training"},
     "training", {"acc": 0.1}, 0.1),
    ({"metricName": "acc", "threshold": 0.5, "compareOperator": "LESS_THAN", "metricGroup": "training"},
     "validation", {"acc": 0.1}, None),  # another group
    ({"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN", "metricGroup": "validation"},
     "validation", {"loss": float("inf")}, None),
    ({"metricName": "loss", "threshold": 2, "compareOperator": "GREATER_THAN", "metricGroup": "validation"},
     "validation", {"other": 9}, None),
])
def test_a_threshold_is_crossed_by_a_finite_value_past_it(cond: dict, group: str, metrics: dict,
                                                          value: float | None) -> None:
    assert wp.crossed(cond, group, metrics) == value


def test_json_is_written_as_go_writes_it() -> None:
    assert wp.go_json({"a": "<x & y>", "b": "✅ ok", "c": [1, 2.5]}) == \
        '{"a":"\\u003cx \\u0026 y\\u003e","b":"✅ ok","c":[1,2.5]}'.encode()


def test_the_signature_is_hmac_sha256_of_timestamp_comma_body() -> None:
    body = b'{"event_id":"x"}'
    expected = hmac.new(b"s3cret", b'1700000000,{"event_id":"x"}', hashlib.sha256).hexdigest()
    assert wp.signature("s3cret", 1700000000, body) == expected
    assert wp.headers("s3cret", 1700000000, body) == {
        "Content-Type": "application/json; charset=UTF-8",
        "X-Determined-AI-Signature-Timestamp": "1700000000",
        "X-Determined-AI-Signature": expected,
    }
    assert wp.headers(None, 1, body) == {"Content-Type": "application/json; charset=UTF-8"}


def test_a_default_state_change_body() -> None:
    data = {"experiment": wp.experiment_data(EXP, "COMPLETED", end_time=1125.9)}
    body = wp.event("e-1", wp.STATE_CHANGE, 1700, {"state": "COMPLETED"}, data)
    assert body == {
        "event_id": "e-1", "event_type": "EXPERIMENT_STATE_CHANGE", "timestamp": 1700,
        "condition": {"state": "COMPLETED"},
        "event_data": {"experiment": {"id": 7, "state": "COMPLETED", "name": "mnist", "duration": 125,
                                      "resource_pool": "default", "slots_per_trial": 1, "workspace": "team",
                                      "project": "vision"}},
    }
    assert wp.experiment_data(EXP, "ACTIVE", end_time=None, trial_id=9)["duration"] == 0
    assert wp.experiment_data(EXP, "ACTIVE", end_time=None, trial_id=9)["trial_id"] == 9


def test_the_test_events() -> None:
    assert wp.test_event("e", 5) == {"event_id": "e", "event_type": "EXPERIMENT_STATE_CHANGE", "timestamp": 5,
                                     "condition": {"state": "COMPLETED"}, "event_data": {"data": "test"}}
    assert json.loads(wp.go_json(wp.SLACK_TEST)) == {
        "blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}


def test_a_slack_completion_message() -> None:
    got = wp.slack_experiment(EXP, "COMPLETED", 99999.0, end_time=1000.0 + 3600 * 2 + 60 * 5 + 30)
    assert got == {
        "blocks": [{"type": "section", "text": {"type": "plain_text",
                                                "text": "Your experiment completed successfully 🎉"}}],
        "attachments": [{"color": "#13B670", "blocks": [{
            "type": "section", "text": {"type": "mrkdwn", "text": "✅ mnist (#7)"},
            "fields": [{"type": "mrkdwn", "text": "*Status*: Completed"},
                       {"type": "mrkdwn", "text": "*Duration*: 2h 5min"},
                       {"type": "mrkdwn", "text": "*Workspace*: team"},
                       {"type": "mrkdwn", "text": "*Project*: vision"}]}]}],
    }


def test_a_slack_alert_and_a_paused_experiment() -> None:
    got = wp.slack_experiment(EXP, "PAUSED", 1060.0, end_time=None, trial_id=3,
                              custom={"level": "WARNING", "title": "t", "description": "d"})
    assert got["blocks"] == [{"type": "section",
                              "text": {"type": "plain_text", "text": "The status of your experiment is PAUSED"},
                              "fields": [{"type": "mrkdwn", "text": "*Level*: WARNING"},
                                         {"type": "mrkdwn", "text": "*Title*: t"},
                                         {"type": "mrkdwn", "text": "*Description*: d"}]}]
    block = got["attachments"][0]
    assert block["color"] == "#009bde"
    assert block["blocks"][0]["text"]["text"] == "mnist (#7)"
    assert block["blocks"][0]["fields"][1] == {"type": "mrkdwn", "text": "*Duration*: 0h 1min"}
    assert block["blocks"][0]["fields"][-1] == {"type": "mrkdwn", "text": "*Trial ID*: 3"}
    assert wp.slack_experiment(EXP, "ERROR", 2000.0, end_time=2000.0)["attachments"][0]["color"] == "#DD5040"


def test_a_slack_task_log_message() -> None:
    got = wp.slack_task_log(task_id="t.1", node="agent-1", line="OOM", regex="O+M", trial=(7, 9))
    assert got == {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": (
        "Experiment ID `7`, Trial ID `9`, running on node `agent-1`, reported a log\n```OOM```\n"
        "This log matched the regex\n```O+M```\nView full logs at /det/experiments/7/trials/9/logs")}}]}
    other = wp.slack_task_log(task_id="c1", node="n", line="x", regex="x", trial=None, task_type="COMMAND")
    assert other["blocks"][0]["text"]["text"].startswith("Task ID `c1`, task type `COMMAND`, running on node `n`")


def test_backoff_grows_and_is_capped() -> None:
    assert wp.backoff_delays(3, 1.0) == [1.0, 2.0]
    assert wp.backoff_delays(1, 1.0) == []
    assert wp.backoff_delays(5, 20.0, cap_s=50.0) == [20.0, 40.0, 50.0, 50.0]
    with pytest.raises(ValueError, match="attempts >= 1"):
        wp.backoff_delays(0, 1.0)


@pytest.mark.parametrize(("pattern", "why"), [
    ("(a+)+$", "nests"), ("(.*a){20}", "nests"), ("([a-z]+\\d)*", "nests"),
    ("(a|aa)+", "alternatives"), ("(x|.y)*", "alternatives"), ("(\\w+)\\1", "backreference"),
    ("ERROR", None), ("Traceback.*", None), ("(error|warning): .*", None), ("(?:foo|bar)+baz", None),
    ("x{3}", None), ("a*b*c*", None)])
def test_task_log_patterns_that_could_take_exponential_time_are_named(pattern: str, why: str | None) -> None:
    from det_jupyter.services.webhooks.payloads import slow_regex
    found = slow_regex(pattern)
    assert (found is None) if why is None else (found is not None and why in found), found
