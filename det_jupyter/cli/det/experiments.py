"""``det experiment …`` and ``det trial …``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from det_jupyter.client import Determined, Experiment, Trial

from . import _exp_more, _workspaces
from ._progress import StatusLine, bar
from ._table import format_pairs, format_table
from .common import (
    CommandError,
    add_output_args,
    connect,
    percent,
    print_json,
    print_rows,
    short_time,
)

EXP_HEADERS = ["ID", "Owner", "Name", "State", "Progress", "Trials", "Start Time", "End Time"]
_WARNINGS = {"LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED":
             "it asks for more slots than its pool has now; it waits (det job list says why)"}
TRIAL_HEADERS = ["Trial ID", "State", "Batches", "Searcher Metric", "Restarts", "Hyperparameters"]


def _exp_row(e: Experiment) -> list[Any]:
    return [e.id, e.username, e.name, e.state, percent(e.progress), e.num_trials,
            short_time(e.start_time), short_time(e.end_time)]


def _trial_row(t: Trial) -> list[Any]:
    return [t.id, t.state, t.total_batches, t.searcher_metric, t.restarts,
            json.dumps(t.hparams, sort_keys=True)]


def _status(e: Experiment, trials: list[Trial] | None = None) -> str:
    text = f"experiment {e.id} {e.state:<10} {bar(e.progress)} {percent(e.progress) or '0.0%'}"
    if e.best_searcher_metric is not None:
        text += f"  best {e.searcher_metric} {e.best_searcher_metric:.6g}"
    return text


def _wait(exp: Experiment, interval: float) -> int:
    status = StatusLine()
    try:
        final = exp.wait(interval=interval, on_update=lambda e: status.update(_status(e)))
    finally:
        status.done()
    print(f"Experiment {exp.id} ended {final}")
    return 0 if final == "COMPLETED" else 1


def _follow(client: Determined, exp: Experiment) -> int:
    trial = exp.wait_first_trial()
    if trial is not None:
        print(f"Following the logs of trial {trial.id} (experiment {exp.id})", flush=True)
        for line in trial.logs(follow=True):
            print(line, flush=True)
    return _wait(exp, 0.5)


def _create_config(args: argparse.Namespace) -> Any:
    """The config file as given, or (with ``--config key=value``) the file with those set."""
    if not args.config_override:
        return args.config
    from det_jupyter.client import InvalidInput

    from ._task_config import ConfigError, load_file
    from ._task_config import apply_overrides as overrides

    try:
        text = open(args.config).read()  # noqa: SIM115 - closed at once
    except OSError as exc:
        raise InvalidInput(f"cannot read the config file {args.config}: {exc.strerror or exc}") from None
    try:
        return overrides(load_file(text, args.config), args.config_override)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def create(args: argparse.Namespace) -> int:
    client = connect(args)
    config = _create_config(args)
    if args.test_mode:
        client.validate_experiment(config, args.context, includes=args.include or (),
                                   template=args.template)
        print("Experiment configuration validation succeeded")
        return 0
    exp = client.create_experiment(config, args.context, includes=args.include or (),
                                   activate=not args.paused, template=args.template)
    print(f"Created experiment {exp.id}", flush=True)
    for warning in exp.launch_warnings:
        hint = _WARNINGS.get(warning, "")
        print(f"Warning: {warning}{': ' + hint if hint else ''}", file=sys.stderr, flush=True)
    if args.follow_first_trial:
        return _follow(client, exp)
    return 0


def list_(args: argparse.Namespace) -> int:
    client = connect(args)
    users: list[str] = list(args.filter_user or [])
    if not args.all and not users:
        users = [client.username or client.whoami()["username"]]
    exps = client.list_experiments(users=users, limit=args.limit or None, offset=args.offset or None,
                                   states=args.state or (), name=args.name,
                                   archived=None if args.all else False, labels=args.label or ())
    if args.json:
        print_json([e.to_dict() for e in exps])
        return 0
    headers = EXP_HEADERS + (["Archived"] if args.all else [])
    rows = [_exp_row(e) + ([bool(e.to_dict().get("archived"))] if args.all else []) for e in exps]
    print_rows(headers, rows, args.csv)
    return 0


def describe(args: argparse.Namespace) -> int:
    client = connect(args)
    exp = client.get_experiment(args.experiment_id)
    trials = exp.trials()
    if args.json:
        print_json({"experiment": exp.to_dict(), "trials": [t.to_dict() for t in trials]})
        return 0
    print(format_pairs([
        ("Experiment", exp.id), ("Name", exp.name), ("State", exp.state), ("Owner", exp.username),
        ("Progress", percent(exp.progress)), ("Searcher", exp.searcher_type),
        ("Searcher metric", exp.searcher_metric), ("Best trial", exp.best_trial_id),
        ("Best metric", exp.best_searcher_metric), ("Start time", short_time(exp.start_time)),
        ("End time", short_time(exp.end_time)),
    ]))
    print()
    print(format_table(TRIAL_HEADERS, [_trial_row(t) for t in trials]))
    return 0


def verb(args: argparse.Namespace) -> int:
    client = connect(args)
    exp = client.get_experiment(args.experiment_id)
    getattr(exp, args.verb)()
    print(f"Experiment {exp.id}: {args.verb} requested (state now {exp.state})")
    return 0


def wait(args: argparse.Namespace) -> int:
    client = connect(args)
    return _wait(client.get_experiment(args.experiment_id), args.interval)


def exp_logs(args: argparse.Namespace) -> int:
    client = connect(args)
    exp = client.get_experiment(args.experiment_id)
    trial = exp.wait_first_trial() if args.follow else next(iter(exp.trials()), None)
    if trial is None:
        raise CommandError(f"experiment {exp.id} has no trial yet")
    for line in trial.logs(follow=args.follow):
        print(line, flush=args.follow)
    return 0


# -- trials -----------------------------------------------------------------------------

def _metric_rows(reports: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    names = sorted({n for r in reports for n in r["metrics"]})
    rows = [[r["steps_completed"], short_time(r["end_time"]), *[r["metrics"].get(n) for n in names]]
            for r in reports]
    return ["Batches", "End Time", *names], rows


def trial_describe(args: argparse.Namespace) -> int:
    client = connect(args)
    trial = client.get_trial(args.trial_id)
    ckpts = trial.checkpoints()
    if args.json:
        out: dict[str, Any] = {"trial": trial.to_dict(), "checkpoints": [c.to_dict() for c in ckpts]}
        if args.metrics:
            out["training_metrics"] = trial.training_metrics()
            out["validation_metrics"] = trial.validation_metrics()
        print_json(out)
        return 0
    print(format_pairs([
        ("Trial", trial.id), ("Experiment", trial.experiment_id), ("State", trial.state),
        ("Batches", trial.total_batches), ("Restarts", trial.restarts),
        ("Searcher metric", trial.searcher_metric),
        ("Hyperparameters", json.dumps(trial.hparams, sort_keys=True)),
    ]))
    print()
    print(format_table(["Checkpoint UUID", "State", "Batches", "Files"],
                       [[c.uuid, c.state, c.steps_completed, len(c.resources)] for c in ckpts]))
    if args.metrics:
        for title, reports in (("Training metrics", trial.training_metrics()),
                               ("Validation metrics", trial.validation_metrics())):
            print(f"\n{title}:")
            print(format_table(*_metric_rows(reports)))
    return 0


def trial_logs(args: argparse.Namespace) -> int:
    client = connect(args)
    trial = client.get_trial(args.trial_id)
    for line in trial.logs(follow=args.follow):
        print(line, flush=args.follow)
    return 0


def add_parsers(sub: Any) -> None:
    e = sub.add_parser("experiment", aliases=["e"], help="manage experiments")
    esub = e.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)

    p = esub.add_parser("create", help="create an experiment")
    p.add_argument("config", help="experiment config file (.yaml)")
    p.add_argument("context", help="context directory (uploaded; .detignore honoured)")
    p.add_argument("-f", "--follow-first-trial", action="store_true",
                   help="print the first trial's logs until the experiment ends")
    p.add_argument("-i", "--include", action="append", metavar="PATH",
                   help="also upload this file or directory (repeatable)")
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.add_argument("--template", metavar="NAME", default=None,
                   help="config template merged into the config (the config wins)")
    p.add_argument("--config", dest="config_override", action="append", default=[],
                   metavar="KEY=VALUE", help="set a config key (e.g. searcher.max_length.batches=5); "
                   "wins over the file; repeatable")
    p.add_argument("-t", "--test", "--test-mode", dest="test_mode", action="store_true",
                   help="only have the master check the config and context (validateOnly); "
                        "nothing is created")
    p.set_defaults(func=create)

    p = esub.add_parser("list", aliases=["ls"], help="list experiments")
    p.add_argument("-a", "--all", action="store_true",
                   help="every user's experiments, archived ones too")
    p.add_argument("--user", dest="filter_user", action="append", metavar="USERNAME",
                   help="only this user's experiments (repeatable)")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only experiments in this state (ACTIVE, PAUSED, COMPLETED, CANCELED, "
                        "ERROR, …; repeatable)")
    p.add_argument("--name", default=None, help="only experiments whose name contains this")
    p.add_argument("--label", action="append", metavar="LABEL",
                   help="only experiments with this label (repeatable: all of them)")
    p.add_argument("--limit", type=int, default=0, help="at most this many")
    p.add_argument("--offset", type=int, default=0, help="skip this many first")
    add_output_args(p)
    p.set_defaults(func=list_)

    p = esub.add_parser("describe", help="describe an experiment and its trials")
    p.add_argument("experiment_id", type=int)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    for name, what in (("activate", "activate (resume) an experiment"),
                       ("pause", "pause an experiment"),
                       ("cancel", "cancel an experiment (trials checkpoint first)"),
                       ("kill", "kill an experiment (no checkpoint)")):
        p = esub.add_parser(name, help=what)
        p.add_argument("experiment_id", type=int)
        p.set_defaults(func=verb, verb=name)

    p = esub.add_parser("wait", help="wait for an experiment to end (exit 0 if COMPLETED)")
    p.add_argument("experiment_id", type=int)
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    p.set_defaults(func=wait)

    p = esub.add_parser("logs", help="the first trial's logs")
    p.add_argument("experiment_id", type=int)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    p.set_defaults(func=exp_logs)
    _workspaces.add_experiment_parsers(esub)
    _exp_more.add_experiment_parsers(esub)

    t = sub.add_parser("trial", aliases=["t"], help="inspect trials")
    tsub = t.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = tsub.add_parser("describe", help="describe a trial and its checkpoints")
    p.add_argument("trial_id", type=int)
    p.add_argument("--metrics", action="store_true", help="also show every metric report")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=trial_describe)
    p = tsub.add_parser("logs", help="a trial's logs")
    p.add_argument("trial_id", type=int)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    p.set_defaults(func=trial_logs)
    _exp_more.add_trial_parsers(tsub)


