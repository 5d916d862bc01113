"""merge_template: Determined's config-template merge (the master's rules; see config/_merge.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from det_jupyter.config import parse_yaml
from det_jupyter.config._merge import check_template_config, merge_template
from det_jupyter.errors import InvalidConfig

# The example of Determined's config-templates.rst: a template that supplies the checkpoint
# storage, and the shortened experiment config that uses it.
DOC_TEMPLATE = """
description: template-tf-gpu
checkpoint_storage:
  type: s3
  access_key: my-access-key
  secret_key: my-secret-key
  bucket: my-bucket-name
"""
DOC_CONFIG = """
description: mnist_tf_const
data:
  base_url: https://s3-us-west-2.amazonaws.com/determined-ai-datasets/mnist/
  training_data: train-images-idx3-ubyte.gz
  training_labels: train-labels-idx1-ubyte.gz
  validation_set_size: 10000
hyperparameters:
  base_learning_rate: 0.001
  weight_cost: 0.0001
  global_batch_size: 64
  n_filters1: 40
  n_filters2: 40
searcher:
  name: single
  metric: error
  max_length:
    batches: 500
  smaller_is_better: true
"""


def test_documented_example_gives_the_full_config() -> None:
    template, config = yaml.safe_load(DOC_TEMPLATE), yaml.safe_load(DOC_CONFIG)
    merged = merge_template(template, config)
    assert merged["description"] == "mnist_tf_const"  # a scalar: the config's
    assert merged["checkpoint_storage"] == {  # only in the template: taken whole
        "type": "s3", "access_key": "my-access-key", "secret_key": "my-secret-key",
        "bucket": "my-bucket-name"}
    for key in ("data", "hyperparameters", "searcher"):
        assert merged[key] == config[key]
    assert set(merged) == {"description", "checkpoint_storage", "data", "hyperparameters", "searcher"}


def test_inputs_are_not_changed_and_nothing_is_shared() -> None:
    template = {"bind_mounts": [{"host_path": "/a", "container_path": "/a"}], "data": {"x": [1]}}
    config = {"data": {"y": {"z": 1}}}
    before = copy.deepcopy((template, config))
    merged = merge_template(template, config)
    assert (template, config) == before
    merged["data"]["x"].append(2)
    merged["data"]["y"]["z"] = 2
    merged["bind_mounts"][0]["host_path"] = "/b"
    assert (template, config) == before


@pytest.mark.parametrize(("template", "config", "expected"), [
    # keys from both sides
    ({"a": 1, "b": 2}, {"b": 3, "c": 4}, {"a": 1, "b": 3, "c": 4}),
    # scalars: the config's, whatever the type
    ({"name": "t", "max_restarts": 5, "debug": True}, {"name": "c", "max_restarts": 0, "debug": False},
     {"name": "c", "max_restarts": 0, "debug": False}),
    # null in the config is unset: the template's value stays
    ({"description": "from template"}, {"description": None}, {"description": "from template"}),
    # the types differ: the config's
    ({"x": {"a": 1}}, {"x": 3}, {"x": 3}),
    ({"x": 3}, {"x": {"a": 1}}, {"x": {"a": 1}}),
    # maps merge recursively, at any depth
    ({"resources": {"slots_per_trial": 2, "resource_pool": "gpu", "shm_size": 1}},
     {"resources": {"slots_per_trial": 4}},
     {"resources": {"slots_per_trial": 4, "resource_pool": "gpu", "shm_size": 1}}),
    ({"data": {"a": {"b": {"c": 1, "d": 2}}}}, {"data": {"a": {"b": {"d": 3}, "e": 4}}},
     {"data": {"a": {"b": {"c": 1, "d": 3}, "e": 4}}}),
    # empty sides
    ({}, {"a": 1}, {"a": 1}),
    ({"a": 1}, {}, {"a": 1}),
])
def test_scalars_and_maps(template: dict[str, Any], config: dict[str, Any],
                          expected: dict[str, Any]) -> None:
    assert merge_template(template, config) == expected


@pytest.mark.parametrize(("template", "config", "expected"), [
    # an ordinary list is the config's when it sets one (the master's code), not a concatenation
    ({"entrypoint": ["python3", "a.py"]}, {"entrypoint": ["python3", "b.py"]},
     {"entrypoint": ["python3", "b.py"]}),
    ({"labels": ["t"]}, {"labels": ["c"]}, {"labels": ["c"]}),
    ({"environment": {"add_capabilities": ["SYS_ADMIN", "NET_ADMIN"]}},
     {"environment": {"add_capabilities": ["NET_ADMIN"]}},
     {"environment": {"add_capabilities": ["NET_ADMIN"]}}),
    # ... and the template's when the config has none
    ({"labels": ["t"]}, {"name": "x"}, {"labels": ["t"], "name": "x"}),
    ({"labels": ["t"]}, {"labels": None}, {"labels": ["t"]}),
    # an empty list in the config is a choice: it stays empty
    ({"labels": ["t"]}, {"labels": []}, {"labels": []}),
])
def test_ordinary_lists(template: dict[str, Any], config: dict[str, Any],
                        expected: dict[str, Any]) -> None:
    assert merge_template(template, config) == expected


def _mount(host: str, container: str, **extra: Any) -> dict[str, Any]:
    return {"host_path": host, "container_path": container, **extra}


def test_bind_mounts_combine_and_a_shared_container_path_keeps_the_configs() -> None:
    template = {"bind_mounts": [_mount("/t/data", "/data", read_only=True), _mount("/t/cache", "/cache")]}
    config = {"bind_mounts": [_mount("/c/data", "/data"), _mount("/c/out", "/out")]}
    assert merge_template(template, config)["bind_mounts"] == [
        _mount("/c/data", "/data"), _mount("/c/out", "/out"), _mount("/t/cache", "/cache")]


def test_bind_mounts_only_in_one_side_or_empty_in_the_config() -> None:
    mounts = [_mount("/t", "/t")]
    assert merge_template({"bind_mounts": mounts}, {})["bind_mounts"] == mounts
    assert merge_template({"bind_mounts": mounts}, {"bind_mounts": []})["bind_mounts"] == mounts
    assert merge_template({}, {"bind_mounts": mounts})["bind_mounts"] == mounts


def test_bind_mounts_duplicates_within_one_side_are_left_alone() -> None:
    """Determined dedupes only across the sides: a broken config stays visibly broken."""
    config = {"bind_mounts": [_mount("/a", "/x"), _mount("/b", "/x")]}
    template = {"bind_mounts": [_mount("/t1", "/y"), _mount("/t2", "/y")]}
    assert merge_template(template, config)["bind_mounts"] == [
        _mount("/a", "/x"), _mount("/b", "/x"), _mount("/t1", "/y"), _mount("/t2", "/y")]


def test_devices_combine_by_container_path_including_the_short_form() -> None:
    template = {"resources": {"devices": ["/dev/fuse:/dev/fuse:rwm", {"host_path": "/dev/t",
                                                                     "container_path": "/dev/x"}],
                              "slots_per_trial": 2}}
    config = {"resources": {"devices": [{"host_path": "/dev/c", "container_path": "/dev/x"}]}}
    assert merge_template(template, config)["resources"] == {
        "devices": [{"host_path": "/dev/c", "container_path": "/dev/x"}, "/dev/fuse:/dev/fuse:rwm"],
        "slots_per_trial": 2}


def test_a_top_level_devices_key_is_an_ordinary_list() -> None:
    assert merge_template({"devices": ["a"]}, {"devices": ["b"]}) == {"devices": ["b"]}


def test_environment_variables_template_first_so_the_config_wins_a_clash() -> None:
    template = {"environment": {"environment_variables": ["A=1", "B=template"]}}
    config = {"environment": {"environment_variables": ["B=config"]}}
    assert merge_template(template, config)["environment"]["environment_variables"] == [
        "A=1", "B=template", "B=config"]


def test_environment_variables_plain_list_meets_per_device_mapping() -> None:
    template = {"environment": {"environment_variables": ["A=1"]}}
    config = {"environment": {"environment_variables": {"cuda": ["C=2"], "gpu": ["ignored"]}}}
    assert merge_template(template, config)["environment"]["environment_variables"] == {
        "cuda": ["A=1", "C=2"], "gpu": ["ignored"], "cpu": ["A=1"], "rocm": ["A=1"]}
    template = {"environment": {"environment_variables": {"gpu": ["G=1"]}}}
    config = {"environment": {"environment_variables": ["A=1"]}}
    assert merge_template(template, config)["environment"]["environment_variables"] == {
        "cpu": ["A=1"], "cuda": ["G=1", "A=1"], "rocm": ["A=1"]}


def test_proxy_ports_combine_by_port() -> None:
    template = {"environment": {"proxy_ports": [{"proxy_port": 8000, "proxy_tcp": True},
                                                {"proxy_port": 9000}]}}
    config = {"environment": {"proxy_ports": [{"proxy_port": 8000}]}}
    assert merge_template(template, config)["environment"]["proxy_ports"] == [
        {"proxy_port": 8000}, {"proxy_port": 9000}]


@pytest.mark.parametrize(("template", "config", "expected"), [
    ("t:1", "c:1", "c:1"),
    ({"cpu": "t-cpu", "cuda": "t-cuda"}, "c:1", "c:1"),
    ("t:1", {"cuda": "c-cuda"}, {"cuda": "c-cuda", "cpu": "t:1", "rocm": "t:1"}),
    ({"cpu": "t-cpu", "gpu": "t-gpu"}, {"cpu": "c-cpu"}, {"cpu": "c-cpu", "cuda": "t-gpu"}),
])
def test_environment_image_plain_or_per_device(template: Any, config: Any, expected: Any) -> None:
    merged = merge_template({"environment": {"image": template}}, {"environment": {"image": config}})
    assert merged["environment"]["image"] == expected


def test_checkpoint_storage_of_another_type_replaces_the_templates_but_keeps_common_fields() -> None:
    template = {"checkpoint_storage": {"type": "s3", "bucket": "b", "access_key": "k",
                                       "save_trial_best": 3}}
    config = {"checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"}}
    assert merge_template(template, config)["checkpoint_storage"] == {
        "type": "shared_fs", "host_path": "/ckpt", "save_trial_best": 3}


def test_checkpoint_storage_of_the_same_or_no_type_merges() -> None:
    template = {"checkpoint_storage": {"type": "s3", "bucket": "b", "access_key": "k"}}
    assert merge_template(template, {"checkpoint_storage": {"type": "s3", "bucket": "mine"}}
                          )["checkpoint_storage"] == {"type": "s3", "bucket": "mine", "access_key": "k"}
    assert merge_template(template, {"checkpoint_storage": {"save_trial_latest": 0}}
                          )["checkpoint_storage"] == {"save_trial_latest": 0, "type": "s3",
                                                      "bucket": "b", "access_key": "k"}


def test_searcher_of_another_name_keeps_only_the_common_fields() -> None:
    template = {"searcher": {"name": "adaptive_asha", "max_trials": 16, "metric": "loss",
                             "smaller_is_better": True}}
    config = {"searcher": {"name": "single", "max_length": {"batches": 100}}}
    assert merge_template(template, config)["searcher"] == {
        "name": "single", "max_length": {"batches": 100}, "metric": "loss", "smaller_is_better": True}


def test_hyperparameters_merge_by_name_and_a_changed_type_replaces() -> None:
    template = {"hyperparameters": {
        "lr": {"type": "double", "minval": 0.001, "maxval": 0.1},
        "layers": {"type": "int", "minval": 1, "maxval": 4},
        "opt": {"type": "categorical", "vals": ["sgd", "adam"]},
        "nested": {"a": {"type": "const", "val": 1}, "b": 2},
        "batch": 32,
    }}
    config = {"hyperparameters": {
        "lr": 0.01,  # a bare value (const): replaces the template's range
        "layers": {"type": "int", "maxval": 8},  # same type: fields merge
        "opt": {"type": "categorical", "vals": ["adamw"]},  # a list: the config's
        "nested": {"a": {"type": "int", "minval": 0, "maxval": 3}},  # another type: the config's
    }}
    assert merge_template(template, config)["hyperparameters"] == {
        "lr": 0.01,
        "layers": {"type": "int", "maxval": 8, "minval": 1},
        "opt": {"type": "categorical", "vals": ["adamw"]},
        "nested": {"a": {"type": "int", "minval": 0, "maxval": 3}, "b": 2},
        "batch": 32,
    }


def test_a_template_of_a_template_is_refused() -> None:
    with pytest.raises(InvalidConfig, match="cannot use another template"):
        merge_template({"template": "base", "description": "x"}, {"name": "e"})
    with pytest.raises(InvalidConfig, match="cannot use another template"):
        check_template_config({"template": None})


@pytest.mark.parametrize("bad", [[1, 2], "text", 3, None])
def test_a_template_config_must_be_a_mapping(bad: Any) -> None:
    with pytest.raises(InvalidConfig, match="must be a YAML mapping"):
        check_template_config(bad)
    with pytest.raises(InvalidConfig, match="must be a YAML mapping"):
        merge_template(bad, {})  # type: ignore[arg-type]


def test_the_config_must_be_a_mapping() -> None:
    with pytest.raises(InvalidConfig, match="the config must be a YAML mapping, got a list"):
        merge_template({}, [1])  # type: ignore[arg-type]


def test_merged_yaml_round_trips_through_the_experiment_parser() -> None:
    merged = merge_template(yaml.safe_load(DOC_TEMPLATE), yaml.safe_load(DOC_CONFIG))
    assert parse_yaml(yaml.safe_dump(merged, sort_keys=False)) == merged
