"""``det webhook create|list|delete|test`` (0.38.1 has no ``det webhook``; its web UI's
fields, as flags)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from det_jupyter.client import webhooks as wh

from ._table import format_table
from .common import CommandError, connect, print_json


def _triggers(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = [wh.trigger("EXPERIMENT_STATE_CHANGE", {"state": s.upper().removeprefix("STATE_")})
           for s in args.state or []]
    out += [wh.trigger("TASK_LOG", {"regex": r}) for r in args.log_regex or []]
    for text in args.trigger or []:
        kind, _, cond = text.partition("=")
        try:
            condition = json.loads(cond) if cond else {}
        except ValueError:
            raise CommandError(f"--trigger {text!r}: the condition after '=' must be JSON") from None
        out.append(wh.trigger(kind, condition))
    if args.custom:
        out.append(wh.trigger("CUSTOM"))
    if not out:
        raise CommandError("say when it fires: --state COMPLETED, --log-regex, --custom or --trigger TYPE=JSON")
    return out


def create(args: argparse.Namespace) -> int:
    hook = wh.create_webhook(connect(args), args.name, args.url, _triggers(args), webhook_type=args.type,
                             workspace_id=args.workspace_id, specific=args.specific or args.custom)
    if args.json:
        print_json(hook)
    else:
        print(f"Created webhook {hook['id']}.")
    return 0


def list_(args: argparse.Namespace) -> int:
    hooks = wh.list_webhooks(connect(args))
    if args.json:
        print_json(hooks)
        return 0
    rows = [[h["id"], h["name"], h["webhookType"].removeprefix("WEBHOOK_TYPE_"),
             h["mode"].removeprefix("WEBHOOK_MODE_"), h.get("workspaceId") or "global", h["url"],
             ", ".join(t["triggerType"].removeprefix("TRIGGER_TYPE_") + (
                 " " + json.dumps(t["condition"]) if t.get("condition") else "") for t in h["triggers"])]
            for h in hooks]
    print(format_table(["ID", "Name", "Type", "Mode", "Workspace", "URL", "Triggers"], rows))
    return 0


def delete(args: argparse.Namespace) -> int:
    wh.delete_webhook(connect(args), args.webhook_id)
    print(f"Deleted webhook {args.webhook_id}.")
    return 0


def test(args: argparse.Namespace) -> int:
    wh.test_webhook(connect(args), args.webhook_id)
    print(f"Webhook {args.webhook_id} accepted the test event.")
    return 0


def add_parsers(sub: Any) -> None:
    w = sub.add_parser("webhook", aliases=["webhooks"], help="webhooks: POST events to a URL")
    wsub = w.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = wsub.add_parser("create", help="a new webhook")
    p.add_argument("name")
    p.add_argument("url", help="where events are POSTed (http:// or https://)")
    p.add_argument("--type", choices=["DEFAULT", "SLACK"], default="DEFAULT", help="the body's shape")
    p.add_argument("--workspace-id", type=int, help="a workspace's webhook (default: global, admins only)")
    p.add_argument("--specific", action="store_true", help="only for experiments whose config names it "
                   "(integrations.webhooks.webhook_name)")
    p.add_argument("--state", action="append", help="fire when an experiment enters this state "
                   "(COMPLETED, ERROR, ...); repeatable")
    p.add_argument("--log-regex", action="append", help="fire once per task on a log line matching this")
    p.add_argument("--custom", action="store_true", help="fire on core_context.alert() (implies --specific)")
    p.add_argument("--trigger", action="append", metavar="TYPE=JSON",
                   help='any trigger, e.g. METRIC_THRESHOLD_EXCEEDED={"metricName":"loss","threshold":2}')
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)
    p = wsub.add_parser("list", aliases=["ls"], help="the webhooks you may see")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)
    p = wsub.add_parser("delete", help="delete a webhook")
    p.add_argument("webhook_id", type=int)
    p.set_defaults(func=delete)
    p = wsub.add_parser("test", help="send a webhook a test event now")
    p.add_argument("webhook_id", type=int)
    p.set_defaults(func=test)
