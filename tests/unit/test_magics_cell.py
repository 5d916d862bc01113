"""%%det_experiment's options and the experiment config they make (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from det_jupyter.magics._cell import CellUsageError, as_config, cell_config, cell_parser


def config(line: str, **layers: Any) -> dict[str, Any]:
    return cell_config(cell_parser().parse_args(line.split()), **layers)


def test_defaults_are_a_single_trial_on_loss_with_the_cell_as_entrypoint() -> None:
    assert config("") == {"name": "notebook-cell", "hyperparameters": {},
                          "searcher": {"name": "single", "metric": "loss"},
                          "entrypoint": "python3 det_cell.py"}


@pytest.mark.parametrize(("line", "expected"), [
    ("--name demo", {"name": "demo"}),
    ("--searcher random --max-trials 4 --max-length 100",
     {"searcher": {"name": "random", "metric": "loss", "max_trials": 4,
                   "max_length": {"batches": 100}}}),
    ("-s adaptive_asha --metric acc --larger-is-better --max-length 400",
     {"searcher": {"name": "adaptive_asha", "metric": "acc", "smaller_is_better": False,
                   "max_time": 400, "time_metric": "batches"}}),
    ("--slots 2 --python /venv/bin/python",
     {"resources": {"slots_per_trial": 2}, "entrypoint": "/venv/bin/python det_cell.py"}),
])
def test_shorthands(line: str, expected: dict[str, Any]) -> None:
    want = {"name": "notebook-cell", "hyperparameters": {},
            "searcher": {"name": "single", "metric": "loss"}, "entrypoint": "python3 det_cell.py"}
    want.update(expected)
    assert config(line) == want


def test_layers_file_then_variable_then_options_and_the_entrypoint_always_the_cell() -> None:
    file_cfg = {"name": "from-file", "entrypoint": "python3 train.py",
                "hyperparameters": {"lr": 0.1, "depth": 2},
                "searcher": {"name": "grid", "metric": "val", "max_length": {"batches": 5}}}
    var_cfg = {"hyperparameters": {"lr": {"type": "double", "minval": 0.01, "maxval": 1.0}},
               "searcher": {"name": "random", "max_trials": 3}}
    assert config("--name cli", file_config=file_cfg, var_config=var_cfg) == {
        "name": "cli",
        "hyperparameters": {"lr": {"type": "double", "minval": 0.01, "maxval": 1.0}, "depth": 2},
        "searcher": {"name": "random", "metric": "val", "max_length": {"batches": 5},
                     "max_trials": 3},
        "entrypoint": "python3 det_cell.py",
    }
    assert file_cfg["name"] == "from-file"  # the inputs are not changed


@pytest.mark.parametrize(("value", "expected"), [
    ({"a": 1}, {"a": 1}), ("a: 1\nb: [2]\n", {"a": 1, "b": [2]}),
])
def test_as_config(value: Any, expected: dict[str, Any]) -> None:
    assert as_config(value, "--config x") == expected


@pytest.mark.parametrize(("value", "message"), [
    ("a: [1", "--config x is not valid YAML"),
    ("just text", "must be a dict or YAML text of a mapping, not str"),
    (42, "not int"),
])
def test_as_config_refuses(value: Any, message: str) -> None:
    with pytest.raises(CellUsageError, match=message.replace("[", r"\[")):
        as_config(value, "--config x")


@pytest.mark.parametrize(("line", "message"), [
    ("--searcher bogus", "argument --searcher/-s: invalid choice: 'bogus'"),
    ("--max-trials many", "argument --max-trials: invalid int value"),
    ("--smaller-is-better --larger-is-better", "not allowed with argument"),
    ("stray", "unrecognized arguments: stray"),
])
def test_bad_options_are_one_line_errors(line: str, message: str) -> None:
    with pytest.raises(CellUsageError, match=message) as info:
        cell_parser().parse_args(line.split())
    assert str(info.value).startswith("%%det_experiment: ")
