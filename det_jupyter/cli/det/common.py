"""What every ``det`` command shares: connecting, printing JSON, short times."""

from __future__ import annotations

import argparse
import csv
import getpass
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from det_jupyter.client import Determined, NotLoggedIn

from ._table import cell, format_table


class CommandError(Exception):
    """A command failed for a reason the user can act on (one line on stderr, exit 1)."""


def connect(args: argparse.Namespace) -> Determined:
    """A session from the cached token (or ``DET_PASS``); on a terminal with no token,
    asks for the password as the stock CLI does.

    Every command connects here, so the two first failures read the same everywhere: a
    master that does not answer is ``cannot reach the master at URL`` (``MasterUnreachable``,
    checked before the token: logging in would not help), a master that answers but has no
    session for this user is ``not logged in to URL`` (``NotLoggedIn``)."""
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


def print_rows(headers: Sequence[str], rows: Iterable[Sequence[Any]], as_csv: bool = False) -> None:
    """A table as ``format_table`` draws it, or with ``as_csv`` as CSV (a header row, then
    one row per record, as the stock CLI's ``--csv``)."""
    if as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(headers)
        for row in rows:
            writer.writerow(["" if v is None else cell(v) for v in row])
        return
    print(format_table(headers, rows))


def size_fmt(n: float) -> str:
    """Bytes as the stock CLI shows them: ``12.0B``, ``3.4KB``, ``1.2MB``."""
    val = float(n)
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(val) < 1024.0:
            return f"{val:3.1f}{unit}B"
        val /= 1024.0
    return f"{val:.1f}EB"


def add_output_args(p: argparse.ArgumentParser) -> None:
    """``--csv`` or ``--json`` instead of the table."""
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print as CSV")
    out.add_argument("--json", action="store_true", help="print JSON")


def read_config_file(path: str) -> str:
    """A ``--config-file``'s text; CommandError naming the file and why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise CommandError(f"cannot read the config file {path}: {why}") from None
