"""``det experiment list-checkpoints|download|fork|continue|set|label`` and
``det trial kill|list-checkpoints|download|metrics``: the stock 0.38.1 shapes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from det_jupyter.client import Checkpoint

from . import _checkpoints
from ._table import format_table
from ._task_config import ConfigError, load_file
from ._task_config import apply_overrides as overrides
from .common import (
    CommandError,
    add_output_args,
    connect,
    print_json,
    print_rows,
    read_config_file,
    short_time,
)

_DOWNLOADABLE = ("COMPLETED", "PARTIALLY_DELETED")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "t", "yes", "y", "1", "on"):
        return True
    if low in ("false", "f", "no", "n", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _sorting(args: argparse.Namespace) -> None:
    if (args.sort_by is None) != (args.smaller_is_better is None):
        raise CommandError("--sort-by and --smaller-is-better go together; pass both or neither")


def _config_from(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    """``--config-file`` (else ``base``) with every ``--config key=value`` set on top."""
    config = base
    if args.config_file:
        try:
            config = load_file(read_config_file(args.config_file), args.config_file)
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
    try:
        return overrides(config, args.config or [])
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


# -- experiments ----------------------------------------------------------------------------

def exp_download(args: argparse.Namespace) -> int:
    """The best ``--top-n`` checkpoints (by the searcher metric, or ``--sort-by``) into
    ``OUTPUT_DIR/UUID``."""
    _sorting(args)
    if args.top_n < 1:
        raise CommandError("--top-n takes a positive number of checkpoints")
    exp = connect(args).get_experiment(args.experiment_id)
    # the best that still have files: the master filters by state before it limits
    if args.sort_by:
        ckpts = exp.checkpoints(sort_by=args.sort_by, order_by="ASC" if args.smaller_is_better else "DESC",
                                limit=args.top_n, states=_DOWNLOADABLE)
    else:
        ckpts = exp.checkpoints(sort_by="SEARCHER_METRIC", limit=args.top_n, states=_DOWNLOADABLE)
    if not ckpts:
        raise CommandError(f"experiment {exp.id} has no validated checkpoint to download")
    top = Path(args.output_dir)
    for ckpt in ckpts:
        _checkpoints.fetch(ckpt, top / ckpt.uuid, args.quiet, args.mode)
        if not args.quiet:
            print()
    return 0


def exp_fork(args: argparse.Namespace) -> int:
    client = connect(args)
    parent = client.get_experiment(args.experiment_id)
    config = _config_from(args, parent.config)
    exp = client.fork_experiment(parent.id, config, activate=not args.paused)
    print(f"Created experiment {exp.id} (forked from {parent.id})", flush=True)
    if args.follow_first_trial:
        from .experiments import _follow

        return _follow(client, exp)
    return 0


def exp_continue(args: argparse.Namespace) -> int:
    """``det e continue``: the override (``--config-file``, ``--config`` on top) merged onto
    the finished experiment's config by the master, which resumes its trial."""
    client = connect(args)
    exp = client.continue_experiment(args.experiment_id, _config_from(args, {}))
    print(f"Continued experiment {exp.id}", flush=True)
    if args.follow_first_trial:
        from .experiments import _follow

        return _follow(client, exp)
    return 0


def exp_set(args: argparse.Namespace) -> int:
    client = connect(args)
    exp = client.get_experiment(args.experiment_id)
    what = args.attribute
    if what == "labels":
        labels = [x.strip() for x in args.value.split(",") if x.strip()]
        exp.patch(labels=labels)
        print(f"Set labels of experiment {exp.id} to {', '.join(exp.labels) or '(none)'}")
        return 0
    if what in ("weight", "priority", "max-slots"):
        job = {"weight": "weight", "priority": "priority", "max-slots": "maxSlots"}[what]
        exp.set_resources(**{job: args.value})
        print(f"Set {what} of experiment {exp.id} to {args.value}")
        return 0
    exp.patch(**{what: args.value})
    print(f"Set {what} of experiment {exp.id}")
    return 0


def exp_label(args: argparse.Namespace) -> int:
    exp = connect(args).get_experiment(args.experiment_id)
    if args.action == "add":
        labels = exp.add_label(args.label)
        print(f"Added label '{args.label}' to experiment {exp.id}")
    else:
        labels = exp.remove_label(args.label)
        print(f"Removed label '{args.label}' from experiment {exp.id}")
    print(f"Labels: {', '.join(labels) or '(none)'}")
    return 0


def _days(args: argparse.Namespace) -> int:
    if args.forever:
        return -1
    if not -1 <= args.days <= 32767:
        raise CommandError("--days takes -1 (forever) to 32767")
    return int(args.days)


def exp_log_retention(args: argparse.Namespace) -> int:
    days = _days(args)
    connect(args).get_experiment(args.experiment_id).set_log_retention(days)
    kept = "forever" if days < 0 else f"{days} day(s) after each trial ended"
    print(f"Logs of experiment {args.experiment_id}'s trials are kept {kept}")
    return 0


def exp_delete_tb_files(args: argparse.Namespace) -> int:
    connect(args).get_experiment(args.experiment_id).delete_tensorboard_files()
    print(f"Deleted the TensorBoard files of experiment {args.experiment_id} (checkpoints stay)")
    return 0


def preview_search(args: argparse.Namespace) -> int:
    """``det preview-search CONFIG``: the searcher with its defaults and the training plan."""
    try:
        config = load_file(read_config_file(args.config_file), args.config_file)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    if "searcher" not in config:
        raise CommandError(f"{args.config_file} has no searcher section")
    summary = connect(args).preview_search(config)
    import yaml

    print("Using search configuration:")
    print(yaml.safe_dump(summary.get("config") or {}, sort_keys=False).rstrip())
    rows = []
    for t in summary.get("trials") or []:
        unit = t.get("unit") or {}
        how = "train to completion" if unit.get("maxLength") else f"train for {unit.get('value')} {unit.get('name')}"
        rows.append([t.get("count"), how])
    print(format_table(["Trials", "Training Time"], rows))
    return 0


# -- trials ---------------------------------------------------------------------------------

def trial_kill(args: argparse.Namespace) -> int:
    trial = connect(args).get_trial(args.trial_id)
    trial.kill()
    print(f"Killed trial {trial.id}")
    return 0


def trial_log_retention(args: argparse.Namespace) -> int:
    days = _days(args)
    connect(args).get_trial(args.trial_id).set_log_retention(days)
    kept = "forever" if days < 0 else f"{days} day(s) after it ends"
    print(f"Logs of trial {args.trial_id} are kept {kept}")
    return 0


def trial_list_checkpoints(args: argparse.Namespace) -> int:
    trial = connect(args).get_trial(args.trial_id)
    ckpts = sorted(trial.checkpoints(), key=lambda c: c.steps_completed or 0)
    _checkpoints.print_list(ckpts, args)
    return 0


def _pick_best(ckpts: list[Checkpoint], metric: str, smaller: bool) -> Checkpoint | None:
    scored = [(c, c.validation_metrics().get(metric)) for c in ckpts]
    valued = [(c, float(v)) for c, v in scored if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not valued:
        return None
    return (min if smaller else max)(valued, key=lambda cv: cv[1])[0]


def trial_download(args: argparse.Namespace) -> int:
    _sorting(args)
    if args.sort_by is not None and not args.best:
        raise CommandError("--sort-by and --smaller-is-better go with --best")
    client = connect(args)
    if args.uuid:
        ckpt: Checkpoint | None = client.get_checkpoint(args.uuid)
        if ckpt is not None and ckpt.trial_id != args.trial_id:
            raise CommandError(f"checkpoint {args.uuid} is not trial {args.trial_id}'s")
    else:
        trial = client.get_trial(args.trial_id)
        ckpts = [c for c in trial.checkpoints() if c.state in _DOWNLOADABLE]
        if args.latest:
            ckpt = max(ckpts, key=lambda c: c.steps_completed or 0) if ckpts else None
        elif args.sort_by:
            ckpt = _pick_best(ckpts, args.sort_by, bool(args.smaller_is_better))
        else:
            ckpt = trial.top_checkpoint()
        if ckpt is None:
            raise CommandError(f"trial {args.trial_id} has no checkpoint to download")
    assert ckpt is not None
    _checkpoints.fetch(ckpt, args.output_dir, args.quiet, args.mode)
    return 0


def trial_metrics(args: argparse.Namespace) -> int:
    """Every training and validation report: one table per group, or one CSV with a
    ``Group`` column."""
    both = connect(args).get_trial(args.trial_id).metrics()
    groups = ["training", "validation"] if args.group == "all" else [args.group]
    if args.json:
        print_json({g: both[g] for g in groups} if len(groups) > 1 else both[groups[0]])
        return 0

    def rows(group: str, names: list[str]) -> list[list[Any]]:
        return [[r["steps_completed"], short_time(r["end_time"]), *[r["metrics"].get(n) for n in names]]
                for r in both[group]]

    if args.csv:
        names = sorted({n for g in groups for r in both[g] for n in r["metrics"]})
        print_rows(["Group", "Batches", "End Time", *names],
                   [[g, *row] for g in groups for row in rows(g, names)], as_csv=True)
        return 0
    for i, group in enumerate(groups):
        names = sorted({n for r in both[group] for n in r["metrics"]})
        if i:
            print()
        print(f"{group.capitalize()} metrics:")
        print(format_table(["Batches", "End Time", *names], rows(group, names)))
    return 0


# -- parsers --------------------------------------------------------------------------------

def _sort_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sort-by", default=None, metavar="METRIC",
                   help="a validation metric to sort by (with --smaller-is-better) instead of the "
                        "searcher metric")
    p.add_argument("--smaller-is-better", type=_bool, default=None, metavar="(true|false)",
                   help="the order for --sort-by")
    p.add_argument("-q", "--quiet", action="store_true", help="only print the checkpoints' paths")
    _checkpoints.add_mode_arg(p)


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-file", metavar="FILE", help="experiment config file (.yaml)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config key (e.g. searcher.max_length.batches=40); repeatable")
    p.add_argument("-f", "--follow-first-trial", action="store_true",
                   help="print the trial's logs until the experiment ends")


def add_experiment_parsers(esub: Any) -> None:
    p = esub.add_parser("list-checkpoints", aliases=["lc"], help="an experiment's checkpoints")
    _checkpoints.add_list_args(p)
    p.set_defaults(func=_checkpoints.list_for_experiment)

    p = esub.add_parser("download", help="copy the best checkpoints' files")
    p.add_argument("experiment_id", type=int)
    p.add_argument("-o", "--output-dir", default="checkpoints",
                   help="top directory: files go to OUTPUT_DIR/UUID/ (default: checkpoints)")
    p.add_argument("--top-n", type=int, default=1, help="how many of the best checkpoints (default 1)")
    _sort_args(p)
    p.set_defaults(func=exp_download)

    p = esub.add_parser("fork", help="a new experiment from another's config and code, changed "
                                     "by --config-file/--config")
    p.add_argument("experiment_id", type=int)
    _config_args(p)
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.set_defaults(func=exp_fork)

    p = esub.add_parser("continue", help="train a finished experiment on (e.g. to a longer "
                                         "searcher.max_length), resuming from its latest checkpoint")
    p.add_argument("experiment_id", type=int)
    _config_args(p)
    p.set_defaults(func=exp_continue)

    s = esub.add_parser("set", help="set an experiment's attributes")
    ssub = s.add_subparsers(dest="attribute", metavar="ATTRIBUTE", required=True)
    for name, kind, what in (("description", str, "its description"), ("name", str, "its name"),
                             ("notes", str, "its notes (markdown)"),
                             ("labels", str, "all its labels, comma-separated ('' for none)"),
                             ("weight", float, "its job's fair-share weight"),
                             ("priority", int, "its job's priority (1-99, lower first)"),
                             ("max-slots", int, "the most slots it may use at once")):
        p = ssub.add_parser(name, help=f"set {what}")
        p.add_argument("experiment_id", type=int)
        p.add_argument("value", type=kind, metavar=name.upper().replace("-", "_"))
        p.set_defaults(func=exp_set)

    p = ssub.add_parser("log-retention", help="keep its trials' logs N days after they end")
    p.add_argument("experiment_id", type=int)
    _retention_args(p)
    p.set_defaults(func=exp_log_retention)

    p = esub.add_parser("delete-tb-files", help="remove its TensorBoard files from the storage")
    p.add_argument("experiment_id", type=int)
    p.set_defaults(func=exp_delete_tb_files)

    lab = esub.add_parser("label", help="add or remove an experiment's labels")
    lsub = lab.add_subparsers(dest="action", metavar="COMMAND", required=True)
    for action in ("add", "remove"):
        p = lsub.add_parser(action, help=f"{action} a label")
        p.add_argument("experiment_id", type=int)
        p.add_argument("label")
        p.set_defaults(func=exp_label)


def _retention_args(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--days", type=int, help="days to keep the logs after the end (-1: forever)")
    which.add_argument("--forever", action="store_true", help="keep the logs forever")


def add_preview_parser(sub: Any) -> None:
    p = sub.add_parser("preview-search", help="how many trials a config's search trains how far")
    p.add_argument("config_file", metavar="CONFIG", help="experiment config file (.yaml)")
    p.set_defaults(func=preview_search)


def add_trial_parsers(tsub: Any) -> None:
    s = tsub.add_parser("set", help="set a trial's attributes")
    ssub = s.add_subparsers(dest="attribute", metavar="ATTRIBUTE", required=True)
    p = ssub.add_parser("log-retention", help="keep its logs N days after it ends")
    p.add_argument("trial_id", type=int)
    _retention_args(p)
    p.set_defaults(func=trial_log_retention)

    p = tsub.add_parser("kill", help="kill a trial now (no checkpoint); the experiment goes on")
    p.add_argument("trial_id", type=int)
    p.set_defaults(func=trial_kill)

    p = tsub.add_parser("list-checkpoints", aliases=["lc"], help="a trial's checkpoints")
    p.add_argument("trial_id", type=int)
    add_output_args(p)
    p.set_defaults(func=trial_list_checkpoints)

    p = tsub.add_parser("download", help="copy one of a trial's checkpoints")
    p.add_argument("trial_id", type=int)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the best by the searcher metric")
    which.add_argument("--latest", action="store_true", help="the most recent one")
    which.add_argument("--uuid", help="this one")
    p.add_argument("-o", "--output-dir", default=None,
                   help="where to put the files (default: ./checkpoints/UUID)")
    _sort_args(p)
    p.set_defaults(func=trial_download)

    p = tsub.add_parser("metrics", help="a trial's metric reports (det trial describe --metrics)")
    p.add_argument("trial_id", type=int)
    p.add_argument("--group", choices=["all", "training", "validation"], default="all",
                   help="which reports (default: both)")
    add_output_args(p)
    p.set_defaults(func=trial_metrics)
