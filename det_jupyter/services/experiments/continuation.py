"""Continuing a finished experiment (0.38.1's ``ContinueExperiment``, ``det e continue``):
what an override may change, and the search the continued experiment goes on with.

Pure: plain values in and out, no I/O. ``ExperimentService.continue_search`` applies them.

A continued search is the experiment's searcher rebuilt from its (merged) config and seed and
walked through what already happened: its first trials are created, the completed ones closed
(each close may ask for the next trial, as it did the first time). Searchers are
deterministic, so the trials it asks for are the experiment's own by request id; those that
did not complete run again from their latest checkpoint, those it asks for that were never
created (a search canceled before it got to them) are created.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ... import searcher as search
from ...config import parse_yaml
from ...errors import Conflict, DetError, InvalidConfig

#: The searchers 0.38.1 continues (parseAndMergeContinueConfig).
CONTINUABLE = ("single", "grid", "random")
#: 0.38.1's errContinueHPSearchCompleted.
HP_SEARCH_COMPLETED = "experiment has been completed, cannot continue this experiment"
#: Values that are one unit or another (0.38.1's union types): an override replaces them whole.
_REPLACED = {("searcher", "max_length"), ("searcher", "max_time")}


def not_terminal_message(state: str) -> str:
    """0.38.1's refusal of an experiment that is not over yet."""
    return f"experiment in non terminal state '{state}', try again later"


def merge_override(active: dict[str, Any], override_text: str) -> dict[str, Any]:
    """The experiment's config with the override merged onto it, by 0.38.1's rules: only the
    single, grid and random searchers continue; only a single searcher takes an override
    (others must send none, ``{}``); ``project`` and ``workspace`` never change; a single
    searcher stays single. InvalidConfig (400) naming the field otherwise. The result still
    needs the checks of a create (``prepare``)."""
    name = str((active.get("searcher") or {}).get("name"))
    single = name == "single"
    if name not in CONTINUABLE:
        raise InvalidConfig(f"Unsupported searcher type provided: '{name}'", field="searcher.name")
    text = override_text.strip() or "{}"
    if not single and text != "{}":
        raise InvalidConfig(f"override config is provided and experiment is not single searcher, got '{name}' "
                            "instead", field="searcher.name")
    try:
        override = parse_yaml(text)
    except DetError as exc:
        raise InvalidConfig(f"parsing override config: {exc.message}") from exc
    for key, verb in (("project", "move"), ("workspace", "move")):
        if key in override:
            raise InvalidConfig(f"'{key}' in override config cannot be specified, use `det experiment {verb}` "
                                f"first if you want to change the {key}", field=key)
    seed = (active.get("reproducibility") or {}).get("experiment_seed")
    repro = override.get("reproducibility")
    if isinstance(repro, dict) and repro.get("experiment_seed", seed) != seed:  # the trials' request ids derive from it: the search would not know them
        raise InvalidConfig("reproducibility.experiment_seed cannot change when an experiment is continued",
                            field="reproducibility.experiment_seed")
    merged = merge(override, active)
    override_name = (merged.get("searcher") or {}).get("name")
    if single and override_name != "single":
        raise InvalidConfig(f"override config must have single searcher type got '{override_name}' instead",
                            field="searcher.name")
    return merged


def merge(override: Any, base: Any, path: tuple[str, ...] = ()) -> Any:
    """``override`` onto ``base``: mappings key by key (recursively), anything else (lists,
    scalars, the one-unit values of ``_REPLACED``) replaced; a null override keeps ``base``."""
    if override is None:
        return base
    if isinstance(override, dict) and isinstance(base, dict) and path not in _REPLACED:
        out = dict(base)
        for key, value in override.items():
            out[key] = merge(value, base.get(key), (*path, str(key)))
        return out
    return override


@dataclass
class Resumption:
    """What continuing a search does: ``searcher`` as it stands once the past is replayed
    into it; ``rerun``: the request ids of the trials that run again; ``create``: trials it
    owes that were never created; ``shutdown``: whether it is already done (nothing to run)."""

    searcher: search.Searcher
    rerun: list[str] = field(default_factory=list)
    create: list[search.Create] = field(default_factory=list)
    shutdown: bool = False


def resume_search(config: dict[str, Any], trials: dict[str, str]) -> Resumption:
    """Replay an experiment's trials (request id -> state) into a fresh searcher of ``config``.
    A single searcher's trial always runs again (to its new length); other searchers' trials
    run again unless COMPLETED. Conflict when the experiment has trials its searcher would
    not make (it cannot be continued)."""
    seed = config["reproducibility"]["experiment_seed"]
    s = search.make_searcher(config["searcher"], config["hyperparameters"], seed)
    single = config["searcher"]["name"] == "single"
    out = Resumption(s)
    pending = list(s.start())
    while pending:
        action = pending.pop(0)
        if isinstance(action, search.Shutdown):
            out.shutdown = True
        if not isinstance(action, search.Create):
            continue
        rid = action.request_id
        pending.extend(s.trial_created(rid))
        if rid not in trials:
            out.create.append(action)
        elif trials[rid] == "COMPLETED" and not single:
            pending.extend(s.trial_closed(rid))
        else:
            out.rerun.append(rid)
    known = set(out.rerun) | {rid for rid, state in trials.items() if state == "COMPLETED"}
    if set(trials) - known:
        raise Conflict("cannot continue this experiment: its search would not make the trials it has "
                       f"({len(set(trials) - known)} unknown to it); det-jupyter continues single-trial "
                       "experiments and grid or random searches")
    return out
