"""``det token create|list|describe|revoke|edit|login`` (the stock CLI's names and flags).

``det token login TOKEN`` caches an access token like a login session, so later commands use
it; ``det user logout`` then forgets it here without revoking it (``det token revoke`` does).
"""

from __future__ import annotations

import argparse
from typing import Any

from det_jupyter.client import Determined, TokenStore
from det_jupyter.client import accounts as acc

from ._table import format_table
from .common import CommandError, connect, print_json, short_time

HEADERS = ["ID", "User ID", "Description", "Created At", "Expires At", "Revoked", "Token Type"]


def _show(infos: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(infos)
        return
    print(format_table(HEADERS, [[t["id"], t["userId"], t.get("description") or "",
                                  short_time(t.get("createdAt")), short_time(t.get("expiry")),
                                  t.get("revoked"),
                                  (t.get("tokenType") or "").removeprefix("TOKEN_TYPE_")]
                                 for t in infos]))


def create(args: argparse.Namespace) -> int:
    lifespan = None
    if args.lifespan is not None:
        lifespan = args.lifespan
    elif args.expiration_days is not None:
        lifespan = "-1" if args.expiration_days == -1 else f"{args.expiration_days}d"
    resp = acc.create_token(connect(args), username=args.username, lifespan=lifespan,
                            description=args.description)
    if args.json:
        print_json(resp)
    else:
        print(f"TokenID: {resp['tokenId']}\nAccess-Token: {resp['token']}")
    return 0


def list_(args: argparse.Namespace) -> int:
    _show(acc.list_tokens(connect(args), username=args.username,
                          show_inactive=args.show_inactive), args.json)
    return 0


def describe(args: argparse.Namespace) -> int:
    infos = acc.list_tokens(connect(args), token_ids=args.token_id)
    missing = sorted(set(args.token_id) - {t["id"] for t in infos})
    if missing:
        raise CommandError(f"no access token {', '.join(map(str, missing))} that you can see; "
                           "det token list --show-inactive shows them")
    _show(infos, args.json)
    return 0


def revoke(args: argparse.Namespace) -> int:
    acc.patch_token(connect(args), args.token_id, revoke=True)
    print(f"Successfully revoked token {args.token_id}.")
    return 0


def edit(args: argparse.Namespace) -> int:
    if args.description is None:
        raise CommandError("nothing to change: pass --description")
    info = acc.patch_token(connect(args), args.token_id, description=args.description)
    if args.json:
        print_json(info)
    else:
        print(f"Successfully updated token with ID: {info['id']}.")
    return 0


def login(args: argparse.Namespace) -> int:
    d = Determined(args.master, token=args.token)
    username = d.whoami()["username"]  # also proves the token works
    TokenStore().save(d.master, username, args.token)
    print(f"Authenticated as {username}.")
    return 0


def add_parsers(sub: Any) -> None:
    tk = sub.add_parser("token", aliases=["tkn"], help="access tokens for scripts and automation")
    tsub = tk.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = tsub.add_parser("create", help="a new access token (shown once)")
    p.add_argument("username", nargs="?", help="for this user (default: you; another user "
                   "needs ADMINISTRATE_TOKENS)")
    p.add_argument("--expiration-days", "-e", type=int, help="valid this many days (-1: the "
                   "longest the master allows; default: the master's default, 30)")
    p.add_argument("--lifespan", help="valid this long, e.g. 12h, 90m or 7d (instead of -e)")
    p.add_argument("--description", "-d", help="what the token is for")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)
    p = tsub.add_parser("list", aliases=["ls"], help="your access tokens (everyone's as an admin)")
    p.add_argument("username", nargs="?", help="only this user's")
    p.add_argument("--show-inactive", action="store_true", help="include revoked and expired ones")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)
    p = tsub.add_parser("describe", help="access tokens by id")
    p.add_argument("token_id", type=int, nargs="+")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)
    p = tsub.add_parser("revoke", help="revoke an access token (refused from the next request)")
    p.add_argument("token_id", type=int)
    p.set_defaults(func=revoke)
    p = tsub.add_parser("edit", help="change an access token's description")
    p.add_argument("token_id", type=int)
    p.add_argument("--description", "-d")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=edit)
    p = tsub.add_parser("login", help="use an access token for later commands")
    p.add_argument("token")
    p.set_defaults(func=login)
