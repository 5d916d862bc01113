"""Issue 27: webhooks through the stock ``determined==0.38.1`` client: ``core_context.alert()``
from a stock Core API trial reaches the webhooks its config names (it 404ed and errored the
trial before), and the stock SDK's webhook calls (``bindings.post_PostWebhook`` and the rest;
0.38.1 has no ``det webhook`` command) work against our master."""

from __future__ import annotations

import json
import time

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, create_experiment
from tests.integration._webhook_receiver import Receiver, assert_signed, signing_key

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


def _hook(client, name: str, url: str, kind: str, trigger: str, mode: str, condition: dict | None = None) -> dict:
    return client.post("/api/v1/webhooks", {
        "name": name, "url": url, "webhookType": f"WEBHOOK_TYPE_{kind}", "mode": f"WEBHOOK_MODE_{mode}",
        "triggers": [{"triggerType": f"TRIGGER_TYPE_{trigger}", "condition": condition or {}}]})["webhook"]


def test_alert_from_a_stock_trial_reaches_the_webhooks_its_config_names(det_env, master: MasterProcess) -> None:
    client = master.admin()
    key = signing_key(master.data_dir)
    with Receiver() as rx, Receiver() as slack, Receiver() as unnamed, Receiver() as done:
        _hook(client, "alerts", rx.url, "DEFAULT", "CUSTOM", "SPECIFIC")
        _hook(client, "alerts-slack", slack.url, "SLACK", "CUSTOM", "SPECIFIC")
        _hook(client, "not-named", unnamed.url, "DEFAULT", "CUSTOM", "SPECIFIC")
        _hook(client, "on-completion", done.url, "DEFAULT", "EXPERIMENT_STATE_CHANGE", "WORKSPACE",
              {"state": "COMPLETED"})
        text = f.steps_config(det_env.python, name="alerting", length=5,
                              hparams={"alert": "loss spiked", "alert_level": "warn"},
                              integrations={"webhooks": {"webhook_name": ["alerts", "alerts-slack"]}})
        exp_id = create_experiment(client, text, f.STEPS_DIR)["experiment"]["id"]
        # a trial that alerts with no webhook named: nothing is sent, and the trial goes on
        quiet = create_experiment(client, f.steps_config(det_env.python, name="quiet", length=5,
                                                         hparams={"alert": "nobody listens"}),
                                  f.STEPS_DIR)["experiment"]["id"]
        for eid in (exp_id, quiet):
            assert f.wait_state(client, eid, TERMINAL, timeout=120) == "STATE_COMPLETED"
        (got,), (slack_got,) = rx.wait(1), slack.wait(1)
        done.wait(2)
        time.sleep(1.0)
        assert len(rx.got) == 1 and len(slack.got) == 1 and unnamed.got == []
    trial_id = f.only_trial(client, exp_id)["id"]
    assert "ALERT-SENT" in f.log_text(client, trial_id)
    for r in (got, slack_got, *done.got):
        assert_signed(key, r)
    body = got.json()
    assert body["event_type"] == "CUSTOM"
    assert body["condition"] == {"state": "ACTIVE"}
    assert body["event_data"]["custom_data"] == {"title": "loss spiked", "description": f"from trial {trial_id}",
                                                 "level": "WARNING"}
    exp = body["event_data"]["experiment"]
    assert exp["id"] == exp_id and exp["trial_id"] == trial_id and exp["name"] == "alerting"
    assert exp["state"] == "ACTIVE" and exp["duration"] == 0
    fields = slack_got.json()["blocks"][0]["fields"]
    assert fields == [{"type": "mrkdwn", "text": "*Level*: WARNING"},
                      {"type": "mrkdwn", "text": "*Title*: loss spiked"},
                      {"type": "mrkdwn", "text": f"*Description*: from trial {trial_id}"}]
    assert sorted(r.json()["event_data"]["experiment"]["id"] for r in done.got) == sorted([exp_id, quiet])


_SDK = """
import json, sys
from determined.common.api import bindings, errors
from determined.experimental import client

master, password, url = sys.argv[1], sys.argv[2], sys.argv[3]
client.login(master=master, user="admin", password=password)
sess = client._determined._session
out = {}
made = bindings.post_PostWebhook(sess, body=bindings.v1Webhook(
    name="sdk-hook", url=url, webhookType=bindings.v1WebhookType.SLACK, mode=bindings.v1WebhookMode.WORKSPACE,
    workspaceId=1, triggers=[bindings.v1Trigger(triggerType=bindings.v1TriggerType.EXPERIMENT_STATE_CHANGE,
                                                condition={"state": "COMPLETED"})])).webhook
out["made"] = made.to_json()
out["listed"] = [w.to_json() for w in bindings.get_GetWebhooks(sess).webhooks]
bindings.post_TestWebhook(sess, id=made.id)
bindings.patch_PatchWebhook(sess, id=made.id, body=bindings.v1PatchWebhook(url=url + "?moved=1"))
out["patched"] = [w.url for w in bindings.get_GetWebhooks(sess).webhooks]
try:
    bindings.post_PostWebhook(sess, body=bindings.v1Webhook(
        name="bad", url="ftp://x", webhookType=bindings.v1WebhookType.DEFAULT,
        mode=bindings.v1WebhookMode.WORKSPACE, triggers=[bindings.v1Trigger(
            triggerType=bindings.v1TriggerType.EXPERIMENT_STATE_CHANGE, condition={"state": "ERROR"})]))
except errors.APIException as exc:
    out["bad"] = [type(exc).__name__, str(exc)]
bindings.delete_DeleteWebhook(sess, id=made.id)
out["after"] = [w.to_json() for w in bindings.get_GetWebhooks(sess).webhooks]
print(json.dumps(out))
"""


def test_the_stock_sdk_manages_webhooks(det_env, master: MasterProcess) -> None:
    with Receiver() as rx:
        res = det_env.run_python(_SDK, args=[master.url, ADMIN_PASSWORD, rx.url])
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert len(rx.got) == 1  # the test event
    made = out["made"]
    assert made["name"] == "sdk-hook" and made["url"] == rx.url and made["workspaceId"] == 1
    assert made["webhookType"] == "WEBHOOK_TYPE_SLACK" and made["mode"] == "WEBHOOK_MODE_WORKSPACE"
    assert made["triggers"] == [{"id": made["triggers"][0]["id"], "webhookId": made["id"], "condition": {
        "state": "COMPLETED"}, "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE"}]
    assert out["listed"] == [made]
    assert rx.got[0].json() == {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}
    assert out["patched"] == [rx.url + "?moved=1"]
    assert out["bad"][0] == "APIException" and out["bad"][1].startswith("request body.url: 'ftp://x'")
    assert out["after"] == []
