"""Webhooks on a real master (issue 27, item 2): events reach a loopback receiver, signed as
Determined 0.38.1 signs them (checked here independently), retried with backoff, managed only
by those allowed, bad bodies refused with a 400 that names the problem, and our ``det webhook``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._master import (
    ADMIN_PASSWORD,
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
)
from tests.integration._exp import COUNTER, counter_config, trials
from tests.integration._webhook_receiver import Receiver, assert_signed, signing_key

pytestmark = pytest.mark.slow
PW = "Hooks-Passw0rd"
DONE = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    master = MasterProcess(tmp_path_factory.mktemp("webhooks") / "master").start()
    yield master
    master.stop()


@pytest.fixture
def admin(m: MasterProcess) -> Iterator[Client]:
    """The admin; every webhook a test made is deleted after it."""
    client = m.admin()
    yield client
    for hook in client.get("/api/v1/webhooks")["webhooks"]:
        client.request("DELETE", f"/api/v1/webhooks/{hook['id']}")


def _hook(client: Client, name: str, url: str, *triggers: dict[str, Any], kind: str = "DEFAULT",
          mode: str = "WORKSPACE", workspace_id: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "url": url, "webhookType": f"WEBHOOK_TYPE_{kind}",
                            "mode": f"WEBHOOK_MODE_{mode}", "triggers": list(triggers)}
    if workspace_id is not None:
        body["workspaceId"] = workspace_id
    return client.post("/api/v1/webhooks", body)["webhook"]


def _state(state: str) -> dict[str, Any]:
    return {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": state}}


def _run(client: Client, integrations: dict[str, Any] | None = None, **hp: Any) -> int:
    cfg = yaml.safe_load(counter_config(length=hp.pop("length", 5), sleep=0.01, **hp))
    if integrations is not None:
        cfg["integrations"] = integrations
    return create_experiment(client, yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]


def _user(admin: Client, m: MasterProcess, name: str) -> Client:
    admin.post("/api/v1/users", {"user": {"username": name, "active": True, "admin": False}, "password": PW})
    return Client(m.url, m.login(name, PW))


def test_state_changes_reach_the_webhooks_they_match_signed(m: MasterProcess, admin: Client) -> None:
    key = signing_key(m.data_dir)
    with Receiver() as everywhere, Receiver() as slack, Receiver() as named:
        _hook(admin, "all-done", everywhere.url, _state("COMPLETED"))
        _hook(admin, "slack-done", slack.url, _state("COMPLETED"), kind="SLACK", workspace_id=1)
        specific = _hook(admin, "named", named.url, _state("COMPLETED"), mode="SPECIFIC")
        plain = _run(admin)
        naming = _run(admin, {"webhooks": {"webhook_name": ["named"]}})
        by_id = _run(admin, {"webhooks": {"webhook_id": [specific["id"]]}})
        excluded = _run(admin, {"webhooks": {"exclude": True}})
        for exp_id in (plain, naming, by_id, excluded):
            assert wait_experiment(admin, exp_id, DONE) == "STATE_COMPLETED"
        got = everywhere.wait(3)
        slack_got, named_got = slack.wait(3), named.wait(2)
        time.sleep(1.5)  # nothing more comes: the excluded experiment reaches no webhook
        assert len(everywhere.got) == 3 and len(slack.got) == 3 and len(named.got) == 2

    for r in got + slack_got + named_got:
        assert_signed(key, r)
    bodies = {r.json()["event_data"]["experiment"]["id"]: r.json() for r in got}
    assert sorted(bodies) == sorted([plain, naming, by_id])
    body = bodies[plain]
    assert body["event_type"] == "EXPERIMENT_STATE_CHANGE" and body["condition"] == {"state": "COMPLETED"}
    assert isinstance(body["timestamp"], int) and len(body["event_id"]) == 36
    exp = body["event_data"]["experiment"]
    assert exp == {"id": plain, "state": "COMPLETED", "name": "counter", "duration": exp["duration"],
                   "resource_pool": "default", "slots_per_trial": 1, "workspace": "Uncategorized",
                   "project": "Uncategorized"}
    assert 0 <= exp["duration"] < 120
    assert sorted(r.json()["event_data"]["experiment"]["id"] for r in named_got) == sorted([naming, by_id])
    msg = slack_got[0].json()
    assert msg["blocks"][0]["text"] == {"type": "plain_text", "text": "Your experiment completed successfully 🎉"}
    attachment = msg["attachments"][0]
    assert attachment["color"] == "#13B670"
    assert attachment["blocks"][0]["fields"][0] == {"type": "mrkdwn", "text": "*Status*: Completed"}


def test_failed_deliveries_are_retried_with_backoff_and_never_block(m: MasterProcess, admin: Client) -> None:
    key = signing_key(m.data_dir)
    mark = len(m.log())
    with Receiver((500, 200)) as flaky, Receiver((404,)) as refusing:
        flaky_hook = _hook(admin, "flaky", flaky.url, _state("COMPLETED"))
        refusing_hook = _hook(admin, "refusing", refusing.url, _state("COMPLETED"))
        dead_hook = _hook(admin, "dead", "http://127.0.0.1:9/nothing-listens", _state("COMPLETED"))
        exp_id = _run(admin)
        assert wait_experiment(admin, exp_id, DONE) == "STATE_COMPLETED"  # not held up by them
        first, second = flaky.wait(2)
        time.sleep(3.5)  # the dead URL's three tries: now, +1 s, +2 s more
        assert len(flaky.got) == 2 and len(refusing.got) == 1  # a 4xx is final
    assert second.at - first.at >= 0.9  # the first backoff is a second
    assert first.body == second.body  # the same event, retried
    for r in (first, second, refusing.got[0]):
        assert_signed(key, r)
    log = m.log()[mark:]
    assert f"webhook {flaky_hook['id']} (EXPERIMENT_STATE_CHANGE of experiment {exp_id}): its receiver " \
           "answered HTTP 500; retrying in 1.0s" in log
    assert f"webhook {refusing_hook['id']} (EXPERIMENT_STATE_CHANGE of experiment {exp_id}) refused by its " \
           "receiver (HTTP 404); not retried" in log
    assert f"webhook {dead_hook['id']} (EXPERIMENT_STATE_CHANGE of experiment {exp_id}) not delivered after " \
           "3 tries" in log
    assert "Traceback" not in log


def test_metric_thresholds_and_log_patterns_fire_once(m: MasterProcess, admin: Client) -> None:
    key = signing_key(m.data_dir)
    with Receiver() as metric, Receiver() as logs:
        _hook(admin, "low-loss", metric.url, {"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED", "condition": {
            "metricName": "validation_loss", "threshold": 0.3, "compareOperator": "LESS_THAN"}})
        _hook(admin, "start-line", logs.url,
              {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": r"run \d+ starting at step"}})
        exp_id = _run(admin, length=15)
        assert wait_experiment(admin, exp_id, DONE) == "STATE_COMPLETED"
        metric.wait(1)
        logs.wait(1)
        time.sleep(2.5)  # a log scan runs every second: nothing more comes
        assert len(metric.got) == 1 and len(logs.got) == 1
    trial_id = trials(admin, exp_id)[0]["id"]
    body = metric.got[0].json()
    assert_signed(key, metric.got[0])
    assert body["event_type"] == "METRIC_THRESHOLD_EXCEEDED"
    assert body["event_data"]["metric"] == {"name": "validation_loss", "group": "validation", "value": 0.2,
                                            "steps_completed": 5}
    assert body["event_data"]["experiment"]["trial_id"] == trial_id
    line = logs.got[0].json()
    assert_signed(key, logs.got[0])
    assert line["event_type"] == "TASK_LOG" and line["condition"] == {"regex": r"run \d+ starting at step"}
    assert line["event_data"]["task_log"]["triggering_log"].endswith("run 1 starting at step 0")
    assert line["event_data"]["task_log"]["task_id"] == trials(admin, exp_id)[0]["taskId"]


def test_test_events_are_sent_now(m: MasterProcess, admin: Client) -> None:
    with Receiver() as default, Receiver() as slack, Receiver((503,)) as down:
        d = _hook(admin, "d", default.url, _state("COMPLETED"))
        s = _hook(admin, "s", slack.url, _state("COMPLETED"), kind="SLACK")
        x = _hook(admin, "x", down.url, _state("COMPLETED"))
        admin.post(f"/api/v1/webhooks/{d['id']}/test")
        admin.post(f"/api/v1/webhooks/{s['id']}/test")
        with pytest.raises(ApiError) as err:
            admin.post(f"/api/v1/webhooks/{x['id']}/test")
        assert err.value.status == 400 and "answered HTTP 503" in err.value.body["message"]
        assert len(default.got) == 1 and len(slack.got) == 1
    assert_signed(signing_key(m.data_dir), default.got[0])
    assert default.got[0].json()["event_data"] == {"data": "test"}
    # 0.38.1 sends Slack's test message unsigned
    assert "x-determined-ai-signature" not in slack.got[0].headers
    assert slack.got[0].json() == {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}


def test_only_those_allowed_manage_webhooks(m: MasterProcess, admin: Client) -> None:
    eve = _user(admin, m, "eve-hooks")  # a new user: Editor on Uncategorized, nothing else
    private = admin.post("/api/v1/workspaces", {"name": "hooks-private"})["workspace"]["id"]
    global_hook = _hook(admin, "g", "http://127.0.0.1:9/g", _state("COMPLETED"))
    private_hook = _hook(admin, "p", "http://127.0.0.1:9/p", _state("ERROR"), workspace_id=private)

    with pytest.raises(ApiError) as err:  # a global webhook needs a cluster-wide role
        _hook(eve, "mine", "http://127.0.0.1:9/e", _state("COMPLETED"))
    assert err.value.status == 403 and "workspaceId" in err.value.body["message"]
    with pytest.raises(ApiError) as err:
        _hook(eve, "mine", "http://127.0.0.1:9/e", _state("COMPLETED"), workspace_id=private)
    assert err.value.status == 404
    own = _hook(eve, "mine", "http://127.0.0.1:9/e", _state("COMPLETED"), workspace_id=1)

    assert [h["id"] for h in eve.get("/api/v1/webhooks")["webhooks"]] == [own["id"]]
    assert sorted(h["id"] for h in admin.get("/api/v1/webhooks")["webhooks"]) == \
        sorted([global_hook["id"], private_hook["id"], own["id"]])
    for hook in (global_hook, private_hook):
        for verb, path, body in (("DELETE", f"/api/v1/webhooks/{hook['id']}", None),
                                 ("POST", f"/api/v1/webhooks/{hook['id']}/test", {}),
                                 ("PATCH", f"/api/v1/webhooks/{hook['id']}", {"url": "http://evil/"})):
            with pytest.raises(ApiError) as err:
                eve.request(verb, path, body)
            assert err.value.status == 404, (verb, path, err.value)
    eve.request("PATCH", f"/api/v1/webhooks/{own['id']}", {"url": "http://127.0.0.1:9/moved"})
    assert eve.get("/api/v1/webhooks")["webhooks"][0]["url"] == "http://127.0.0.1:9/moved"
    eve.request("DELETE", f"/api/v1/webhooks/{own['id']}")
    assert eve.get("/api/v1/webhooks")["webhooks"] == []
    # the URL (a credential, for Slack) is sealed in the database
    for name in ("det.db", "det.db-wal"):
        path = m.data_dir / name
        assert not path.exists() or b"127.0.0.1:9/p" not in path.read_bytes()


@pytest.mark.parametrize("body,message", [
    ({"url": "ftp://example.com/x"}, "request body.url"),
    ({"url": "not a url"}, "request body.url"),
    ({"triggers": [{"triggerType": "TRIGGER_TYPE_SOMETIMES"}]}, "request body.triggers[0].triggerType"),
    ({"triggers": []}, "request body.triggers: has fewer than 1 items"),
    ({"webhookType": "WEBHOOK_TYPE_TEAMS"}, "request body.webhookType"),
    ({"name": ""}, "webhook name must not be empty"),
    ({"triggers": [{"triggerType": "TRIGGER_TYPE_CUSTOM"}]}, "only works on a webhook with mode WEBHOOK_MODE_SPECIFIC"),
    ({"triggers": [_state("FINISHED")]}, "triggers[0].condition.state must be an experiment state"),
    ({"triggers": [{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "(unclosed"}}]},
     "triggers[0].condition.regex is not a valid regular expression"),
    ({"triggers": [{"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED", "condition": {"threshold": 1}}]},
     "condition.metricName"),
])
def test_bad_bodies_are_refused_naming_what_is_wrong(admin: Client, body: dict[str, Any], message: str) -> None:
    full = {"name": "bad", "url": "http://127.0.0.1:9/x", "webhookType": "WEBHOOK_TYPE_DEFAULT",
            "triggers": [_state("COMPLETED")], **body}
    with pytest.raises(ApiError) as err:
        admin.post("/api/v1/webhooks", full)
    assert err.value.status == 400, err.value
    assert message in err.value.body["message"], err.value.body
    assert "Traceback" not in json.dumps(err.value.body)


def test_missing_things_and_duplicates(admin: Client) -> None:
    _hook(admin, "twice", "http://127.0.0.1:9/a", _state("COMPLETED"))
    with pytest.raises(ApiError) as err:
        _hook(admin, "twice", "http://127.0.0.1:9/b", _state("COMPLETED"))
    assert err.value.status == 409
    for verb, path, body in (("DELETE", "/api/v1/webhooks/999999", None), ("POST", "/api/v1/webhooks/999999/test", {}),
                             ("POST", "/api/v1/webhooks/custom", {"experimentId": 999999, "data": {}})):
        with pytest.raises(ApiError) as err:
            admin.request(verb, path, body)
        assert err.value.status == 404, (verb, path, err.value)
    with pytest.raises(ApiError) as err:
        admin.post("/api/v1/webhooks/custom", {"data": {"title": "t"}})
    assert err.value.status == 400 and "experimentId" in err.value.body["message"]


def test_our_det_webhook_commands(m: MasterProcess, admin: Client, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env.update(DET_MASTER=m.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path))
    det = [sys.executable, "-m", "det_jupyter.cli.det"]

    def run(*argv: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run([*det, *argv], env=env, capture_output=True, text=True, timeout=120, input=stdin)
        assert (done.returncode == 0) is ok, (argv, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done

    run("user", "login", "admin", stdin=ADMIN_PASSWORD + "\n")
    with Receiver() as rx:
        made = run("webhook", "create", "cli-hook", rx.url, "--state", "COMPLETED", "--log-regex", "OOM",
                   "--workspace-id", "1", "--json")
        hook = json.loads(made.stdout)
        assert [t["triggerType"] for t in hook["triggers"]] == ["TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                                                                "TRIGGER_TYPE_TASK_LOG"]
        listed = run("webhook", "list").stdout
        assert "cli-hook" in listed and rx.url in listed and 'EXPERIMENT_STATE_CHANGE {"state": "COMPLETED"}' in listed
        assert f"Webhook {hook['id']} accepted" in run("webhook", "test", str(hook["id"])).stdout
        assert rx.got[0].json()["event_data"] == {"data": "test"}
    failed = run("webhook", "test", str(hook["id"]), ok=False)  # the receiver is gone
    assert failed.stderr.startswith("Error:") and "could not reach" in failed.stderr
    bad = run("webhook", "create", "x", "http://127.0.0.1:9/", "--trigger", "SOMETIMES={}", ok=False)
    assert "unknown trigger type" in bad.stderr
    run("webhook", "delete", str(hook["id"]))
    assert json.loads(run("webhook", "list", "--json").stdout) == []
