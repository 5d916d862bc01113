"""expand_experiment_config fills Determined 0.38's defaults into a new dict."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from det_jupyter.config import (
    MasterDefaults,
    environment_variables,
    expand_experiment_config,
    parse_yaml,
    searcher_max_length,
)
from det_jupyter.errors import InvalidConfig

DEFAULTS = MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/data/checkpoints"})
MINIMAL: dict[str, Any] = {
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "validation_loss"},
}


def expand(config: dict[str, Any], seed: int = 7) -> dict[str, Any]:
    return expand_experiment_config(config, DEFAULTS, seed=seed)


def test_minimal_config_gets_every_default() -> None:
    out = expand(MINIMAL)
    assert out["entrypoint"] == "python3 train.py"
    assert out["name"].startswith("Experiment ")
    for key, value in {
        "description": "", "labels": [], "data": {}, "hyperparameters": {}, "bind_mounts": [],
        "checkpoint_policy": "best", "max_restarts": 5, "min_validation_period": {"batches": 0},
        "min_checkpoint_period": {"batches": 0}, "records_per_epoch": 0, "scheduling_unit": 100,
        "perform_initial_validation": False, "debug": False,
            "optimizations": {  # what the stock Trial runner reads
                "aggregation_frequency": 1, "average_aggregated_gradients": True,
                "average_training_metrics": True, "gradient_compression": False,
                "grad_updates_size_file": None, "mixed_precision": "O0",
                "tensor_fusion_threshold": 64, "tensor_fusion_cycle_time": 1,
                "auto_tune_tensor_fusion": False},
        "preemption_timeout": None, "workspace": None, "project": None,
        "reproducibility": {"experiment_seed": 7},
    }.items():
        assert out[key] == value, key
    assert out["profiling"]["enabled"] is False
    assert [p["name"] for p in out["log_policies"]] == ["CUDA OOM", "ECC Error"]
    searcher = out["searcher"]
    assert searcher["smaller_is_better"] is True
    assert searcher["max_concurrent_trials"] == 16
    assert searcher["source_trial_id"] is None and searcher["source_checkpoint_uuid"] is None
    assert out["resources"] == {
        "slots_per_trial": 1, "resource_pool": "", "weight": 1, "priority": None, "max_slots": None,
        "shm_size": None, "is_single_node": False, "devices": [], "native_parallel": False,
        "agent_label": None,
    }
    storage = out["checkpoint_storage"]
    assert storage["type"] == "shared_fs" and storage["host_path"] == "/data/checkpoints"
    assert storage["storage_path"] is None
    assert (storage["save_experiment_best"], storage["save_trial_best"], storage["save_trial_latest"]) == (0, 1, 1)
    env = out["environment"]
    assert env["environment_variables"] == {"cpu": [], "cuda": [], "rocm": []}
    assert set(env["image"]) == {"cpu", "cuda", "rocm"}
    assert env["ports"] == {} and env["proxy_ports"] == [] and env["force_pull_image"] is False


def test_asha_searcher_defaults() -> None:
    config = {**MINIMAL, "searcher": {"name": "adaptive_asha", "metric": "loss", "max_trials": 8,
                                      "time_metric": "batches", "max_time": 1000}}
    searcher = expand(config)["searcher"]
    assert (searcher["mode"], searcher["divisor"], searcher["max_rungs"], searcher["bracket_rungs"]) == (
        "standard", 4, 5, [])
    assert searcher["max_trials"] == 8 and searcher["max_concurrent_trials"] == 16


def test_given_values_win_over_defaults() -> None:
    config = {**MINIMAL, "name": "mine", "max_restarts": 0, "resources": {"slots_per_trial": 2, "priority": 10},
              "reproducibility": {"experiment_seed": 123},
              "checkpoint_storage": {"type": "shared_fs", "host_path": "/mine", "save_trial_best": 3}}
    out = expand(config)
    assert out["name"] == "mine" and out["max_restarts"] == 0
    assert out["resources"]["slots_per_trial"] == 2 and out["resources"]["priority"] == 10
    assert out["reproducibility"]["experiment_seed"] == 123
    assert out["checkpoint_storage"]["host_path"] == "/mine"
    assert out["checkpoint_storage"]["save_trial_best"] == 3


def test_other_storage_type_does_not_inherit_master_keys() -> None:
    out = expand({**MINIMAL, "checkpoint_storage": {"type": "directory", "container_path": "/ckpt"}})
    assert "host_path" not in out["checkpoint_storage"]
    assert out["checkpoint_storage"]["save_trial_latest"] == 1


def test_storage_without_a_type_is_the_masters_with_its_policies() -> None:
    out = expand({**MINIMAL, "checkpoint_storage": {"save_trial_latest": 4, "save_trial_best": 0}})
    assert out["checkpoint_storage"]["type"] == "shared_fs"
    assert out["checkpoint_storage"]["host_path"] == "/data/checkpoints"
    assert (out["checkpoint_storage"]["save_trial_latest"], out["checkpoint_storage"]["save_trial_best"]) == (4, 0)
    with pytest.raises(InvalidConfig, match="save_trial_latest"):
        expand({**MINIMAL, "checkpoint_storage": {"save_trial_latest": -1}})


def test_expansion_never_mutates_input_and_is_deterministic() -> None:
    config = {**MINIMAL, "hyperparameters": {"lr": 0.1, "g": {"n": {"type": "int", "minval": 1, "maxval": 3}}},
              "environment": {"environment_variables": ["A=1"]}}
    before = copy.deepcopy(config)
    first = expand(config, seed=3)
    assert config == before
    assert expand(config, seed=3) == first
    first["hyperparameters"]["g"]["n"]["minval"] = 99
    assert config == before


def test_name_depends_on_seed() -> None:
    names = {expand(MINIMAL, seed=s)["name"] for s in range(20)}
    assert len(names) > 1


def test_hyperparameters_normalised_with_nested_groups() -> None:
    config = {**MINIMAL, "hyperparameters": {
        "lr": 0.01,
        "layers": [64, 32],
        "opt": {"type": "categorical", "vals": ["adam", "sgd"]},
        "arch": {"depth": {"type": "int", "minval": 1, "maxval": 4}, "act": "relu",
                 "inner": {"p": {"type": "const", "val": 0.5}}},
    }}
    assert expand(config)["hyperparameters"] == {
        "lr": {"type": "const", "val": 0.01},
        "layers": {"type": "const", "val": [64, 32]},
        "opt": {"type": "categorical", "vals": ["adam", "sgd"]},
        "arch": {"depth": {"type": "int", "minval": 1, "maxval": 4, "count": None},
                 "act": {"type": "const", "val": "relu"},
                 "inner": {"p": {"type": "const", "val": 0.5}}},
    }


@pytest.mark.parametrize(("given", "cpu", "cuda"), [
    (["A=1", "B=x=y"], {"A": "1", "B": "x=y"}, {"A": "1", "B": "x=y"}),
    ({"cpu": ["A=1"], "cuda": ["G=1"]}, {"A": "1"}, {"G": "1"}),
    ({"gpu": ["G=2"]}, {}, {"G": "2"}),
    (None, {}, {}),
])
def test_environment_variables_per_slot_type(given: Any, cpu: dict[str, str], cuda: dict[str, str]) -> None:
    config = {**MINIMAL, "environment": {"environment_variables": given}}
    out = expand(config)
    assert environment_variables(out, "cpu") == cpu
    assert environment_variables(out, "cuda") == cuda
    assert set(out["environment"]["environment_variables"]) == {"cpu", "cuda", "rocm"}


def test_master_environment_variables_come_first() -> None:
    defaults = MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/c"},
                              environment_variables=("A=master", "M=1"))
    out = expand_experiment_config({**MINIMAL, "environment": {"environment_variables": ["A=exp"]}},
                                   defaults, seed=1)
    assert environment_variables(out, "cpu") == {"A": "exp", "M": "1"}


def test_image_string_applies_to_every_slot_type() -> None:
    out = expand({**MINIMAL, "environment": {"image": "my/image:1"}})
    assert out["environment"]["image"] == {"cpu": "my/image:1", "cuda": "my/image:1", "rocm": "my/image:1"}


@pytest.mark.parametrize(("searcher", "length"), [
    ({"max_length": 500}, 500),
    ({"max_length": {"batches": 300}}, 300),
    ({"max_length": {"epochs": 2}}, 2),
    ({"max_time": 1000, "time_metric": "batches"}, 1000),
    ({}, None),
])
def test_searcher_max_length(searcher: dict[str, Any], length: int | None) -> None:
    config = {**MINIMAL, "searcher": {**MINIMAL["searcher"], **searcher}}
    assert searcher_max_length(expand(config)) == length


def test_expand_validates_first() -> None:
    with pytest.raises(InvalidConfig) as info:
        expand({"searcher": MINIMAL["searcher"]})
    assert info.value.field == "entrypoint"


def test_bad_master_checkpoint_storage_is_reported() -> None:
    defaults = MasterDefaults(checkpoint_storage={"type": "s3", "bucket": "b"})
    with pytest.raises(InvalidConfig) as info:
        expand_experiment_config(MINIMAL, defaults, seed=1)
    assert info.value.field == "master.checkpoint_storage.type"


def test_yaml_to_expanded_config() -> None:
    text = """
name: mnist
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1, base: 10}
  batch: 64
searcher:
  name: adaptive_asha
  metric: validation_loss
  max_trials: 16
  time_metric: batches
  max_time: 1000
resources:
  slots_per_trial: 2
environment:
  environment_variables:
    cuda: [NCCL_DEBUG=INFO]
"""
    out = expand(parse_yaml(text), seed=11)
    assert out["name"] == "mnist"
    assert out["hyperparameters"]["batch"] == {"type": "const", "val": 64}
    assert out["hyperparameters"]["lr"]["count"] is None
    assert out["searcher"]["mode"] == "standard"
    assert searcher_max_length(out) == 1000
    assert environment_variables(out, "cuda") == {"NCCL_DEBUG": "INFO"}
    assert environment_variables(out, "cpu") == {}
    assert out["reproducibility"]["experiment_seed"] == 11
