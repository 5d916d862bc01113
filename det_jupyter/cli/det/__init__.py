"""``det``: det-jupyter's own command line, built only on the SDK (``det_jupyter.client``),
with Determined's command shapes for what the master serves.

Errors are one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from det_jupyter import __version__
from det_jupyter.client import DetClientError
from det_jupyter.names import visible

from . import (
    _checkpoints,
    _exp_more,
    _models,
    _rbac,
    _shell,
    _tasks,
    _templates,
    _tensorboard,
    _tokens,
    _users,
    _webhooks,
    _workspaces,
    cluster,
    experiments,
)
from ._table import format_pairs, format_table
from .common import CommandError

__all__ = ["build_parser", "format_pairs", "format_table", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="det", description="det-jupyter's command line (Determined 0.38.1's command shapes).",
        epilog="The master is -m/--master, else DET_MASTER, else http://127.0.0.1:8080.",
    )
    parser.add_argument("-m", "--master", default=None, help="master URL (default: $DET_MASTER)")
    parser.add_argument("-u", "--user", default=None, help="user (default: the last one logged in)")
    parser.add_argument("-v", "--version", action="version", version=f"det (det-jupyter) {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    experiments.add_parsers(sub)
    _exp_more.add_preview_parser(sub)
    _workspaces.add_parsers(sub)
    _checkpoints.add_parsers(sub)
    _models.add_parsers(sub)
    cluster.add_parsers(sub)
    _tasks.add_parsers(sub)
    _tensorboard.add_parsers(sub)
    _shell.add_parsers(sub)
    _rbac.add_parsers(sub)
    _users.add_parsers(sub)
    _tokens.add_parsers(sub)
    _templates.add_parsers(sub)
    _webhooks.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (DetClientError, CommandError) as exc:
        print(f"Error: {visible(str(exc))}", file=sys.stderr)  # it may quote names: escaped
        return 1
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `det e list | head`: the reader left; say nothing more and exit quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug of ours: still one line, never a traceback
        print(f"Error: unexpected {type(exc).__name__}: {visible(str(exc))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
