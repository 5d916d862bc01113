"""``services.experiments.continuation``: 0.38.1's rules for what ``det e continue`` may
override, and the search a continued experiment goes on with (pure: no master)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from det_jupyter import config as expconf
from det_jupyter import searcher as search
from det_jupyter.errors import Conflict, InvalidConfig
from det_jupyter.services.experiments.continuation import merge, merge_override, resume_search
from det_jupyter.services.experiments.preparation import prepare

DEFAULTS = expconf.MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/tmp/unused"})


def _config(searcher: dict[str, Any], **hparams: Any) -> dict[str, Any]:
    raw = {"name": "c", "entrypoint": "python3 train.py", "hyperparameters": {"x": 1.0, **hparams},
           "searcher": {"metric": "loss", "max_length": {"batches": 10}, **searcher},
           "reproducibility": {"experiment_seed": 7}}
    return prepare(yaml.safe_dump(raw), [], DEFAULTS, validate_only=True).config


SINGLE = _config({"name": "single"})
RANDOM = _config({"name": "random", "max_trials": 3, "max_concurrent_trials": 1},
                 x={"type": "double", "minval": 0.0, "maxval": 1.0})
GRID = _config({"name": "grid"}, x={"type": "categorical", "vals": [1, 2]})


def test_merge_replaces_lengths_and_lists_and_merges_mappings() -> None:
    base = {"searcher": {"name": "single", "max_length": {"batches": 5}}, "labels": ["a"], "d": {"k": 1}}
    over = {"searcher": {"max_length": {"epochs": 2}}, "labels": ["b"], "d": {"j": 2}, "n": None}
    assert merge(over, base) == {"searcher": {"name": "single", "max_length": {"epochs": 2}},
                                 "labels": ["b"], "d": {"k": 1, "j": 2}, "n": None}


def test_an_override_lengthens_a_single_trial() -> None:
    merged = merge_override(SINGLE, "searcher:\n  max_length:\n    batches: 40\n")
    assert merged["searcher"]["max_length"] == {"batches": 40}
    assert {k: v for k, v in merged.items() if k != "searcher"} == \
        {k: v for k, v in SINGLE.items() if k != "searcher"}
    assert merge_override(SINGLE, "") == SINGLE == merge_override(SINGLE, "{}\n")


@pytest.mark.parametrize("config, text, field, words", [
    (SINGLE, "project: p", "project", "'project' in override config cannot be specified"),
    (SINGLE, "workspace: w", "workspace", "'workspace' in override config cannot be specified"),
    (SINGLE, "searcher: {name: grid}", "searcher.name", "must have single searcher type got 'grid'"),
    (SINGLE, "reproducibility: {experiment_seed: 8}", "reproducibility.experiment_seed", "cannot change"),
    (SINGLE, "searcher: [", None, "parsing override config"),
    (SINGLE, "- a list", None, "parsing override config"),
    (RANDOM, "searcher: {max_length: {batches: 1}}", "searcher.name",
     "override config is provided and experiment is not single searcher, got 'random'"),
    ({**SINGLE, "searcher": {**SINGLE["searcher"], "name": "adaptive_asha"}}, "{}", "searcher.name",
     "Unsupported searcher type provided: 'adaptive_asha'"),
])
def test_what_an_override_may_not_do(config: dict, text: str, field: str | None, words: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        merge_override(config, text)
    assert words in err.value.message and err.value.field == field


def _created(config: dict[str, Any]) -> list[str]:
    """The request ids the experiment's search made, in order, each trial closed at once."""
    s = search.make_searcher(config["searcher"], config["hyperparameters"], 7)
    out, pending = [], list(s.start())
    while pending:
        action = pending.pop(0)
        if isinstance(action, search.Create):
            out.append(action.request_id)
            s.trial_created(action.request_id)
            pending.extend(s.trial_closed(action.request_id))
    return out


def test_a_single_trial_runs_again_whatever_its_state() -> None:
    [rid] = _created(SINGLE)
    for state in ("COMPLETED", "CANCELED", "ERROR"):
        plan = resume_search(SINGLE, {rid: state})
        assert (plan.rerun, plan.create, plan.shutdown) == ([rid], [], False)
        assert plan.searcher.progress() == 0.0
        assert [type(a) for a in plan.searcher.trial_closed(rid)] == [search.Shutdown]


def test_a_search_reruns_its_unfinished_trials_and_makes_those_it_owes() -> None:
    first, second, _third = _created(RANDOM)  # one at a time: each close makes the next
    plan = resume_search(RANDOM, {first: "COMPLETED", second: "CANCELED"})
    assert (plan.rerun, plan.create, plan.shutdown) == ([second], [], False)
    owed = resume_search(RANDOM, {first: "COMPLETED"})  # canceled before it made the second
    assert owed.rerun == [] and [a.request_id for a in owed.create] == [second]
    done = resume_search(GRID, dict.fromkeys(_created(GRID), "COMPLETED"))
    assert (done.rerun, done.create, done.shutdown) == ([], [], True)


def test_trials_the_search_would_not_make_are_refused() -> None:
    with pytest.raises(Conflict, match="would not make"):
        resume_search(SINGLE, {"not-its-request-id": "CANCELED"})
