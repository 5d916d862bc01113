"""parse_yaml and validate_experiment_config: every bad config names its field and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from det_jupyter.config import parse_yaml, validate_experiment_config
from det_jupyter.errors import InvalidConfig

BASE: dict[str, Any] = {
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "validation_loss"},
}
DELETE = object()
ASHA = {"name": "adaptive_asha", "metric": "loss", "max_trials": 4, "time_metric": "batches", "max_time": 100}


def with_(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE with one dotted path set (or removed when value is the DELETE marker)."""
    config = copy.deepcopy(base or BASE)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return config

BAD = [
    # (config, field, word in message)
    (with_("entrypoint", DELETE), "entrypoint", "entrypoint"),
    (with_("entrypoint", []), "entrypoint", "non-empty list"),
    (with_("entrypoint", ["python3", 3]), "entrypoint", "list of strings"),
    (with_("entrypoint", "  "), "entrypoint", "empty"),
    (with_("searcher", DELETE), "searcher", "no searcher"),
    (with_("searcher", "single"), "searcher", "mapping"),
    (with_("searcher.name", "asha"), "searcher.name", "adaptive_asha"),
    (with_("searcher.name", DELETE), "searcher.name", "no name"),
    (with_("searcher.name", "custom"), "searcher.name", "removed in Determined 0.38"),
    (with_("searcher.name", "sync_halving"), "searcher.name", "use adaptive_asha"),
    (with_("searcher.name", "adaptive_simple"), "searcher.name", "removed"),
    (with_("searcher.name", "adaptive"), "searcher.name", "removed"),
    (with_("searcher.metric", DELETE), "searcher.metric", "metric"),
    (with_("searcher.smaller_is_better", "yes"), "searcher.smaller_is_better", "true or false"),
    (with_("searcher", {"name": "random", "metric": "m"}), "searcher.max_trials", "max_trials"),
    (with_("searcher", {"name": "random", "metric": "m", "max_trials": 0}), "searcher.max_trials", ">= 1"),
    (with_("searcher", {**ASHA, "max_trials": None}), "searcher.max_trials", "max_trials"),
    (with_("searcher", {**ASHA, "time_metric": None}), "searcher.time_metric", "max_time: 1000"),
    (with_("searcher", {**ASHA, "max_time": None}), "searcher.max_time", "time_metric: batches"),
    (with_("searcher", {**ASHA, "max_time": 0}), "searcher.max_time", "range"),
    (with_("searcher", {**ASHA, "max_time": "100"}), "searcher.max_time", "integer"),
    (with_("searcher", {**ASHA, "name": "async_halving"}), "searcher.num_rungs", "num_rungs"),
    (with_("searcher", {**ASHA, "mode": "wild"}), "searcher.mode", "conservative"),
    (with_("searcher", {**ASHA, "divisor": 1}), "searcher.divisor", "greater than 1"),
    (with_("searcher", {**ASHA, "max_concurrent_trials": -1}), "searcher.max_concurrent_trials", "range"),
    (with_("searcher", {**ASHA, "bracket_rungs": [0]}), "searcher.bracket_rungs", "positive"),
    (with_("searcher.max_length", {"steps": 3}), "searcher.max_length", "batches"),
    (with_("hyperparameters", [1, 2]), "hyperparameters", "mapping"),
    (with_("hyperparameters", {"lr": {"type": "float"}}), "hyperparameters.lr.type", "unknown hyperparameter type"),
    (with_("hyperparameters", {"lr": {"type": "double", "maxval": 1}}), "hyperparameters.lr.minval", "minval"),
    (with_("hyperparameters", {"lr": {"type": "double", "minval": 1}}), "hyperparameters.lr.maxval", "maxval"),
    (with_("hyperparameters", {"lr": {"type": "double", "minval": 2, "maxval": 1}}), "hyperparameters.lr.minval", "greater than"),
    (with_("hyperparameters", {"n": {"type": "int", "minval": 1.5, "maxval": 4}}), "hyperparameters.n.minval", "integer"),
    (with_("hyperparameters", {"lr": {"type": "log", "minval": -4, "maxval": -1}}), "hyperparameters.lr.base", "base"),
    (with_("hyperparameters", {"lr": {"type": "log", "minval": -4, "maxval": -1, "base": 0}}), "hyperparameters.lr.base", "positive"),
    (with_("hyperparameters", {"opt": {"type": "categorical", "vals": []}}), "hyperparameters.opt.vals", "non-empty"),
    (with_("hyperparameters", {"opt": {"type": "categorical"}}), "hyperparameters.opt.vals", "non-empty"),
    (with_("hyperparameters", {"n": {"type": "int", "minval": 1, "maxval": 4, "count": 0}}), "hyperparameters.n.count", ">= 1"),
    (with_("hyperparameters", {"c": {"type": "const"}}), "hyperparameters.c.val", "val"),
    (with_("hyperparameters", {"g": {"inner": {"type": "int", "minval": 5, "maxval": 1}}}), "hyperparameters.g.inner.minval", "greater"),
    (with_("resources.slots_per_trial", -1), "resources.slots_per_trial", "range"),
    (with_("resources.slots_per_trial", 1.5), "resources.slots_per_trial", "integer"),
    (with_("resources.slots_per_trial", True), "resources.slots_per_trial", "integer"),
    (with_("resources.priority", 0), "resources.priority", "between 1 and 99"),
    (with_("resources.priority", 100), "resources.priority", "between 1 and 99"),
    (with_("resources", "big"), "resources", "mapping"),
    (with_("max_restarts", -1), "max_restarts", "range"),
    (with_("max_restarts", "5"), "max_restarts", "integer"),
    (with_("checkpoint_storage", {"type": "s3", "bucket": "b"}), "checkpoint_storage.type", "not supported yet"),
    (with_("checkpoint_storage", {"type": "gcs", "bucket": "b"}), "checkpoint_storage.type", "not supported yet"),
    (with_("checkpoint_storage", {"type": "floppy"}), "checkpoint_storage.type", "shared_fs"),
    (with_("checkpoint_storage", {"type": "shared_fs"}), "checkpoint_storage.host_path", "host_path"),
    (with_("checkpoint_storage", {"type": "directory"}), "checkpoint_storage.container_path", "container_path"),
    (with_("checkpoint_storage", {"type": "shared_fs", "host_path": "/x", "save_trial_best": -1}),
     "checkpoint_storage.save_trial_best", "range"),
    (with_("checkpoint_policy", "some"), "checkpoint_policy", "best"),
    (with_("environment.environment_variables", ["NOEQUALS"]), "environment.environment_variables[0]", "KEY=VALUE"),
    (with_("environment.environment_variables", "A=1"), "environment.environment_variables", "list"),
    (with_("environment.environment_variables", {"tpu": ["A=1"]}), "environment.environment_variables.tpu", "slot type"),
    (with_("environment.environment_variables", {"cuda": ["A"]}), "environment.environment_variables.cuda[0]", "KEY=VALUE"),
    (with_("environment.image", 3), "environment.image", "image"),
    (with_("environment.ports", {"web": 0}), "environment.ports.web", "range"),
    (with_("environment", []), "environment", "mapping"),
    (with_("labels", "a"), "labels", "list of strings"),
    (with_("name", 3), "name", "string"),
    (with_("data", [1]), "data", "mapping"),
    (with_("debug", "no"), "debug", "true or false"),
    (with_("reproducibility.experiment_seed", -3), "reproducibility.experiment_seed", "range"),
    (with_("min_validation_period", {"batches": -1}), "min_validation_period.batches", "range"),
    (with_("bind_mounts", [{"host_path": "/a"}]), "bind_mounts[0].container_path", "container_path"),
    (with_("log_policies", [{"pattern": "x"}]), "log_policies[0].name", "name"),
    (with_("log_policies", [{"name": "n", "action": "explode"}]), "log_policies[0].action", "cancel_retries"),
]


@pytest.mark.parametrize(("config", "field", "word"), BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_config_names_field_and_problem(config: dict[str, Any], field: str, word: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        validate_experiment_config(config)
    assert info.value.field == field
    assert word in info.value.message
    assert info.value.message.startswith(field + ":")
    assert "Traceback" not in info.value.message


def test_unknown_searcher_lists_the_accepted_names() -> None:
    with pytest.raises(InvalidConfig) as info:
        validate_experiment_config(with_("searcher.name", "asha"))
    assert info.value.message == (
        "searcher.name: unknown searcher 'asha'; use one of single, random, grid, adaptive_asha, async_halving")


GOOD = [
    BASE,
    with_("entrypoint", ["python3", "train.py"]),
    with_("searcher", ASHA),
    with_("searcher", {**ASHA, "name": "async_halving", "num_rungs": 3}),
    with_("searcher", {"name": "random", "metric": "m", "max_trials": 3}),
    with_("searcher", {"name": "grid", "metric": "m"},
          with_("hyperparameters", {"a": {"type": "int", "minval": 1, "maxval": 3, "count": 3}, "b": 1,
                                    "c": {"type": "categorical", "vals": [1, 2]}})),
    with_("hyperparameters", {"lr": 0.1, "group": {"x": {"type": "log", "minval": -3, "maxval": -1, "base": 10}},
                              "d": {"type": "double", "minval": 0, "maxval": 1}}),
    with_("environment.environment_variables", {"cpu": ["A=1"], "cuda": ["B=2=3"]}),
    with_("checkpoint_storage", {"type": "directory", "container_path": "/ckpt"}),
    with_("resources.slots_per_trial", 0),
    with_("searcher.max_length", {"batches": 100}),
    with_("log_policies", [{"name": "oom", "pattern": ".*OOM.*", "action": {"type": "cancel_retries"}}]),
]


@pytest.mark.parametrize("config", GOOD)
def test_good_configs_pass(config: dict[str, Any]) -> None:
    validate_experiment_config(config)


def _grid(hparams: dict[str, Any]) -> dict[str, Any]:
    return with_("hyperparameters", hparams, with_("searcher", {"name": "grid", "metric": "m"}))


def test_grid_without_count_names_the_hparam() -> None:
    config = _grid({"opt": {"lr": {"type": "double", "minval": 0.1, "maxval": 1}}})
    with pytest.raises(InvalidConfig) as info:
        validate_experiment_config(config)
    assert info.value.field == "hyperparameters.opt.lr.count"
    assert "opt.lr" in info.value.message


def test_grid_over_the_limit_is_refused() -> None:
    config = _grid({k: {"type": "double", "minval": 0, "maxval": 1, "count": 100} for k in "abc"})
    with pytest.raises(InvalidConfig) as info:
        validate_experiment_config(config)
    assert info.value.field == "hyperparameters"
    assert "1000000" in info.value.message


def test_int_grid_is_clipped_to_the_range() -> None:
    # Unclipped, 3 * 1000 * 40 = 120000 points (over the limit); the int has only 2 distinct
    # values in [1, 2], so the grid is 2 * 1000 * 40 = 80000 and is accepted.
    hp = {"n": {"type": "int", "minval": 1, "maxval": 2, "count": 3},
          "d": {"type": "double", "minval": 0, "maxval": 1, "count": 1000},
          "e": {"type": "categorical", "vals": list(range(40))}}
    validate_experiment_config(_grid(hp))


# --- parse_yaml ---------------------------------------------------------------------------

def test_parse_yaml_mapping() -> None:
    assert parse_yaml("entrypoint: python3 train.py\nsearcher: {name: single}\n") == {
        "entrypoint": "python3 train.py", "searcher": {"name": "single"}}


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n"])
def test_parse_yaml_empty(text: str) -> None:
    with pytest.raises(InvalidConfig, match="the experiment config is empty"):
        parse_yaml(text)


@pytest.mark.parametrize(("text", "where"), [
    ("entrypoint: a\nsearcher:\n  name: single\n metric: x\n", "line 4"),
    ("a: [1, 2\nb: 3\n", "line 2"),
    ("a: 'unterminated\n", "line 2"),
])
def test_parse_yaml_malformed_names_line_and_column(text: str, where: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        parse_yaml(text)
    message = info.value.message
    assert where in message and "column" in message
    assert "Traceback" not in message and "\n" not in message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_parse_yaml_top_level_must_be_mapping(text: str) -> None:
    with pytest.raises(InvalidConfig, match="mapping at the top level"):
        parse_yaml(text)
