"""Experiment configuration: parse YAML, validate, fill Determined 0.38.1's defaults, and
package model-definition contexts. Pure: stdlib + PyYAML."""

from __future__ import annotations

from ._container import DEFAULT_SHM_SIZE, container_for
from ._container_defaults import apply_container_defaults, container_defaults
from ._context import (
    MAX_CONTEXT_SIZE,
    context_to_tgz,
    extract_tgz,
    read_context_dir,
    tgz_to_b64,
)
from ._defaults import (
    MasterDefaults,
    environment_variables,
    expand_experiment_config,
    searcher_max_length,
)
from ._detignore import DEFAULT_IGNORES, DetIgnore
from ._entrypoint import is_trial_class, trial_entrypoint
from ._hparams import MAX_GRID_POINTS, grid_size
from ._keys import check_experiment_keys, check_task_keys, check_template_keys, task_keys_only
from ._merge import check_template_config, merge_template
from ._parse import parse_yaml
from ._searcher import REMOVED_SEARCHERS, SEARCHERS
from ._validate import validate_container_keys, validate_experiment_config
from ._yaml import MAX_ALIAS_NODES, MAX_CONFIG_BYTES, MAX_YAML_DEPTH, load_yaml

__all__ = [
    "DEFAULT_IGNORES",
    "DEFAULT_SHM_SIZE",
    "MAX_ALIAS_NODES",
    "MAX_CONFIG_BYTES",
    "MAX_CONTEXT_SIZE",
    "MAX_GRID_POINTS",
    "MAX_YAML_DEPTH",
    "REMOVED_SEARCHERS",
    "SEARCHERS",
    "DetIgnore",
    "MasterDefaults",
    "apply_container_defaults",
    "check_experiment_keys",
    "check_task_keys",
    "check_template_config",
    "check_template_keys",
    "container_defaults",
    "container_for",
    "context_to_tgz",
    "environment_variables",
    "expand_experiment_config",
    "extract_tgz",
    "grid_size",
    "is_trial_class",
    "load_yaml",
    "merge_template",
    "parse_yaml",
    "read_context_dir",
    "searcher_max_length",
    "task_keys_only",
    "tgz_to_b64",
    "trial_entrypoint",
    "validate_container_keys",
    "validate_experiment_config",
]
