"""What every ``det`` command shares: connecting, printing JSON, short times."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from det_jupyter.client import Determined, NotLoggedIn


class CommandError(Exception):
    """A command failed for a reason the user can act on (one line on stderr, exit 1)."""


def connect(args: argparse.Namespace) -> Determined:
    """A session from the cached token (or ``DET_PASS``); on a terminal with no token,
    asks for the password as the stock CLI does."""
    try:
        return Determined(args.master, args.user)
    except NotLoggedIn:
        if not sys.stdin.isatty():
            raise
    user = args.user or "determined"
    password = getpass.getpass(f"Password for user '{user}': ")
    return Determined(args.master, user, password)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def short_time(ts: str | None) -> str:
    """``2026-11-23T01:02:03.456789Z`` → ``2026-11-23 01:02:03``."""
    if not ts:
        return ""
    return ts.replace("T", " ").split(".")[0].rstrip("Z")


def percent(fraction: float | None) -> str:
    return "" if fraction is None else f"{fraction * 100:.1f}%"
