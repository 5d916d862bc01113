"""``%%det_experiment``'s pure parts: its options, and the experiment config they make."""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from typing import Any

import yaml

SCRIPT = "det_cell.py"
DEFAULT_NAME = "notebook-cell"
SEARCHERS = ("single", "random", "grid", "adaptive_asha")


class CellUsageError(ValueError):
    """A bad ``%%det_experiment`` option (shown as one line, never a traceback)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit the kernel
        raise CellUsageError(f"%%det_experiment: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise CellUsageError(message or "")


def cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%det_experiment", add_help=False,
                description="Run this cell as a det-jupyter experiment; the cell is the "
                            f"entrypoint script ({SCRIPT}).")
    p.add_argument("--config-file", "-f", metavar="PATH", help="experiment config YAML file")
    p.add_argument("--config", "-c", metavar="VAR",
                   help="a dict or YAML text variable of the notebook (over --config-file)")
    p.add_argument("--name", "-n", help="experiment name")
    p.add_argument("--searcher", "-s", choices=SEARCHERS, help="searcher.name")
    p.add_argument("--metric", help="searcher.metric (the validation metric to optimise)")
    order = p.add_mutually_exclusive_group()
    order.add_argument("--smaller-is-better", dest="smaller", action="store_const", const=True)
    order.add_argument("--larger-is-better", dest="smaller", action="store_const", const=False)
    p.add_argument("--max-length", type=int, metavar="BATCHES",
                   help="searcher.max_length in batches (max_time for adaptive_asha)")
    p.add_argument("--max-trials", type=int, metavar="N", help="searcher.max_trials")
    p.add_argument("--slots", type=int, metavar="N", help="resources.slots_per_trial")
    p.add_argument("--context", metavar="DIR",
                   help="directory uploaded with the cell (default: only the cell)")
    p.add_argument("--include", "-i", action="append", default=[], metavar="PATH",
                   help="also upload this file or directory (repeatable)")
    p.add_argument("--python", default="python3", help="interpreter of the entrypoint")
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.add_argument("--wait", action="store_true", help="block until it ends")
    p.add_argument("-m", "--master", default=None, help="master URL (default: $DET_MASTER)")
    p.add_argument("-u", "--user", default=None, help="det user")
    p.add_argument("-h", "--help", action="store_true", help="show this help")
    return p


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested mappings merge, anything else replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def as_config(value: Any, where: str) -> dict[str, Any]:
    """A config given as a dict or YAML text, as a dict; ``CellUsageError`` otherwise."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise CellUsageError(f"{where} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(value, Mapping):
        raise CellUsageError(f"{where} must be a dict or YAML text of a mapping, "
                             f"not {type(value).__name__}")
    return dict(value)


def cell_config(opts: argparse.Namespace, *, file_config: Mapping[str, Any] | None = None,
                var_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The experiment config of a cell: defaults (a ``single`` searcher on ``loss``), then
    the ``--config-file`` config, then the ``--config`` variable, then the shorthand options.
    The entrypoint is always the cell's script."""
    cfg: dict[str, Any] = {"name": DEFAULT_NAME, "hyperparameters": {},
                           "searcher": {"name": "single", "metric": "loss"}}
    for layer in (file_config, var_config):
        if layer:
            cfg = _merge(cfg, layer)
    searcher = cfg.setdefault("searcher", {})
    if opts.name:
        cfg["name"] = opts.name
    if opts.searcher:
        searcher["name"] = opts.searcher
    if opts.metric:
        searcher["metric"] = opts.metric
    if opts.smaller is not None:
        searcher["smaller_is_better"] = opts.smaller
    if opts.max_length is not None:
        if searcher.get("name") == "adaptive_asha":
            searcher["max_time"] = opts.max_length
            searcher.setdefault("time_metric", "batches")
        else:
            searcher["max_length"] = {"batches": opts.max_length}
    if opts.max_trials is not None:
        searcher["max_trials"] = opts.max_trials
    if opts.slots is not None:
        cfg.setdefault("resources", {})["slots_per_trial"] = opts.slots
    cfg["entrypoint"] = f"{opts.python} {SCRIPT}"
    return cfg
