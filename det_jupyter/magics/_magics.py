"""``%det …`` (the CLI, with widgets where it prints a table) and ``%%det_experiment``."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from det_jupyter.client import DetClientError, Determined
from det_jupyter.names import visible

from ._cell import SCRIPT, CellUsageError, as_config, cell_config, cell_parser


def _error(message: str) -> None:
    """One line on stderr, as the CLI does (never a traceback)."""
    print(f"Error: {visible(message)}", file=sys.stderr)  # it may quote names: escaped


def _unexpected(exc: Exception) -> None:
    """A bug of ours: still one line, never a traceback (as the CLI says it)."""
    _error(f"unexpected {type(exc).__name__}: {exc}")


def _widget_for(args: argparse.Namespace) -> Any:
    """The widget that replaces the table this CLI command prints, or ``None`` if the
    command prints something else (or was asked for JSON)."""
    from det_jupyter.cli.det import cluster, experiments

    if getattr(args, "json", False):
        return None
    func = args.func
    table_commands = {
        experiments.list_: "experiments", experiments.describe: "experiment",
        experiments.trial_describe: "trial", cluster.job_list: "jobs",
        cluster.agent_list: "cluster", cluster.slot_list: "cluster",
    }
    model_commands = {"list": "models", "ls": "models", "describe": "model"}
    kind = (model_commands.get(args.subcommand) if args.command == "model"
            else table_commands.get(func))
    if kind is None:
        return None
    from det_jupyter import widgets
    from det_jupyter.cli.det.common import connect

    det = connect(args)
    if kind == "experiments":
        return widgets.ExperimentsWidget(det, all_users=args.all, limit=args.limit or None)
    if kind == "experiment":
        return widgets.ExperimentWidget(args.experiment_id, det)
    if kind == "trial":
        return widgets.TrialWidget(args.trial_id, det)
    if kind == "jobs":
        return widgets.JobQueueWidget(det, resource_pool=args.resource_pool)
    if kind == "models":
        return widgets.ModelRegistryWidget(
            det, text=args.name or "", archived=args.all, labels=args.label or (),
            workspace_names=args.workspace_names.split(",") if args.workspace_names else ())
    if kind == "model":
        return widgets.ModelRegistryWidget(det, model=args.name)
    return widgets.ClusterWidget(det)


DASHBOARD_MIME = "application/vnd.det-jupyter.dashboard+json"
_DASHBOARD_USAGE = "usage: %det dashboard [experiments | experiment ID | trial ID | registry]"


class DashboardLink:
    """What ``%det dashboard …`` returns: in JupyterLab with det-jupyter's extension, a button
    that opens that dashboard panel (``DASHBOARD_MIME``); elsewhere, a line saying so."""

    def __init__(self, kind: str, ident: int | None = None) -> None:
        self.kind, self.id = kind, ident

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind} if self.id is None else {"kind": self.kind, "id": self.id}
        what = self.kind if self.id is None else f"{self.kind} {self.id}"
        return {DASHBOARD_MIME: data,
                "text/plain": f"det dashboard: {what} (a button in JupyterLab with det-jupyter's extension)"}


def dashboard_link(argv: list[str]) -> DashboardLink:
    """``%det dashboard`` arguments → the panel they name; UsageError for anything else."""
    kind = argv[0] if argv else "experiments"
    if kind in ("experiments", "registry") and len(argv) <= 1:
        return DashboardLink(kind)
    if kind in ("experiment", "trial") and len(argv) == 2 and argv[1].isdigit() and int(argv[1]) > 0:
        return DashboardLink(kind, int(argv[1]))
    raise UsageError(_DASHBOARD_USAGE)


def run_det(line: str) -> Any:
    """What ``%det LINE`` does; returns a widget or ``None`` (the CLI printed its output)."""
    from det_jupyter.cli.det import build_parser, experiments, main
    from det_jupyter.cli.det.common import CommandError

    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%det: {exc}") from None
    if argv[:1] == ["dashboard"]:
        return dashboard_link(argv[1:])
    parser = build_parser()
    parser.prog = "%det"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (printed already) or a usage error
        if exc.code:
            text = err.getvalue().strip().splitlines()
            raise UsageError(text[-1] if text else "%det: bad arguments") from None
        return None
    # `e create` only: other commands' functions are named `create` too (model, template…).
    if args.func is experiments.create and not args.follow_first_trial:
        return _create(args)
    try:
        widget = _widget_for(args)
    except (DetClientError, CommandError) as exc:
        _error(str(exc))
        return None
    if widget is not None:
        return widget
    main(argv)  # prints the CLI's output; errors as one line on stderr
    return None


def _create(args: argparse.Namespace) -> Any:
    """``%det e create CONFIG CTX``: submit as the CLI does, return the experiment widget."""
    from det_jupyter import widgets
    from det_jupyter.cli.det.common import connect

    try:
        det = connect(args)
        exp = det.create_experiment(args.config, args.context, includes=args.include or (),
                                    activate=not args.paused)
        print(f"Created experiment {exp.id}")
        for warning in exp.launch_warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        return widgets.ExperimentWidget(exp.id, det)
    except DetClientError as exc:
        _error(str(exc))
        return None


def submit_cell(line: str, cell: str, user_ns: dict[str, Any]) -> Any:
    """What ``%%det_experiment LINE`` does with ``cell``; returns the experiment widget."""
    parser = cell_parser()
    try:
        opts = parser.parse_args(shlex.split(line))
    except (CellUsageError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if opts.help:
        print(parser.format_help())
        return None
    try:
        file_config = var_config = None
        if opts.config_file:
            try:
                text = Path(opts.config_file).expanduser().read_text()
            except OSError as exc:
                raise CellUsageError(f"cannot read --config-file {opts.config_file}: "
                                     f"{exc.strerror or exc}") from None
            file_config = as_config(text, f"--config-file {opts.config_file}")
        if opts.config:
            if opts.config not in user_ns:
                raise CellUsageError(f"--config {opts.config}: no such variable in the notebook")
            var_config = as_config(user_ns[opts.config], f"--config {opts.config}")
        config = cell_config(opts, file_config=file_config, var_config=var_config)
        if opts.context and not os.path.isdir(opts.context):
            raise CellUsageError(f"--context {opts.context} is not a directory")
    except CellUsageError as exc:
        raise UsageError(str(exc)) from None

    from det_jupyter import widgets  # imported first: the widget shows the run from its start

    try:
        det = Determined(opts.master, opts.user)
        with tempfile.TemporaryDirectory(prefix="det-cell-") as tmp:
            script = Path(tmp) / SCRIPT
            script.write_text(cell if cell.endswith("\n") else cell + "\n")
            if opts.context:
                exp = det.create_experiment(config, opts.context, includes=[script, *opts.include],
                                            activate=not opts.paused)
            else:
                exp = det.create_experiment(config, tmp, includes=opts.include,
                                            activate=not opts.paused)
        print(f"Created experiment {exp.id} ({config['name']}, searcher "
              f"{config['searcher'].get('name')})")
        if opts.wait:
            print(f"Experiment {exp.id} ended {exp.wait(interval=1.0)}")
        return widgets.ExperimentWidget(exp.id, det)
    except DetClientError as exc:
        _error(str(exc))
        return None


@magics_class
class DetMagics(Magics):
    """``%det`` and ``%%det_experiment`` (``%load_ext det_jupyter``)."""

    @line_magic
    def det(self, line: str) -> Any:
        """%det COMMAND … — det-jupyter's ``det`` command (``%det -h``). Where the command
        prints a table (``e list``, ``e describe``, ``t describe``, ``job list``,
        ``agent list``, ``slot list``, ``model list``, ``model describe``) it returns a live
        widget instead; ``e create`` prints the new id and returns the experiment's widget;
        ``dashboard [experiments | experiment ID | trial ID | registry]`` returns a button that
        opens that JupyterLab dashboard panel.
        Errors are one line, never a traceback."""
        try:
            return run_det(line)
        except UsageError:
            raise
        except Exception as exc:
            _unexpected(exc)
            return None

    @cell_magic
    def det_experiment(self, line: str, cell: str) -> Any:
        """%%det_experiment [--config-file F] [--config VAR] [--name N] [--searcher S]
        [--metric M] [--max-length B] [--max-trials N] [--context DIR] [--include PATH]…

        Submit this cell as an experiment (the cell is its entrypoint script, read
        hyperparameters with ``det_harness.core.init().hparams``) and return its live
        widget. ``%%det_experiment --help`` lists every option."""
        try:
            return submit_cell(line, cell, self.shell.user_ns if self.shell else {})
        except UsageError:
            raise
        except Exception as exc:
            _unexpected(exc)
            return None
