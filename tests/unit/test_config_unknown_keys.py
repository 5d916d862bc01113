"""Unknown config keys are refused as Determined 0.38.1's schema refuses them, with the fix.

Every config 0.38.1 accepts must still pass: its example configs (a sample committed under
``fixtures/det_examples``; all of them when the Determined mirror is on this machine), our own
examples, and a stored (expanded) config submitted again.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_jupyter.config import (
    MasterDefaults,
    check_experiment_keys,
    check_task_keys,
    check_template_keys,
    expand_experiment_config,
    parse_yaml,
    task_keys_only,
)
from det_jupyter.config._keys import unknown_keys
from det_jupyter.errors import InvalidConfig, InvalidRequest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "det_examples"
MIRROR = Path(os.environ.get("DET_MIRROR", "/work/.mirror/determined-ai+determined/repo"))
DEFAULTS = MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/data/checkpoints"})
BASE: dict[str, Any] = {
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "validation_loss"},
}


def with_(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE (or ``base``) with one dotted path set."""
    config = copy.deepcopy(base or BASE)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


def refusal(config: dict[str, Any]) -> InvalidConfig:
    with pytest.raises(InvalidConfig) as info:
        expand_experiment_config(config, DEFAULTS, seed=1)
    return info.value


# -- refusals, with the closest key --------------------------------------------------------------

REFUSED = [
    # (config, field, exact message)
    (with_("searcher.max_lenght", {"batches": 300}), "searcher.max_lenght",
     "unknown key searcher.max_lenght; did you mean searcher.max_length?"),
    (with_("hyperparameter", {"lr": 0.1}), "hyperparameter",
     "unknown key hyperparameter; did you mean hyperparameters?"),
    (with_("resources.slots_per_tiral", 2), "resources.slots_per_tiral",
     "unknown key resources.slots_per_tiral; did you mean resources.slots_per_trial?"),
    # resources.json lists `slots` (for commands); 0.38.1's master refuses it in an experiment
    (with_("resources.slots", 2), "resources.slots",
     "unknown key resources.slots; did you mean resources.slots_per_trial?"),
    (with_("environment.environment_varaibles", ["A=1"]), "environment.environment_varaibles",
     "unknown key environment.environment_varaibles; did you mean environment.environment_variables?"),
    (with_("environment.registry_auth", {"user": "me"}), "environment.registry_auth.user",
     "unknown key environment.registry_auth.user; did you mean environment.registry_auth.username?"),
    (with_("bind_mounts", [{"host_path": "/a", "container_path": "/a"},
                           {"host_path": "/b", "container_path": "/b", "readonly": True}]),
     "bind_mounts[1].readonly", "unknown key bind_mounts[1].readonly; did you mean bind_mounts[1].read_only?"),
    (with_("checkpoint_storage", {"type": "shared_fs", "hostpath": "/c"}), "checkpoint_storage.hostpath",
     "unknown key checkpoint_storage.hostpath; did you mean checkpoint_storage.host_path?"),
    (with_("optimizations.mixed_precison", "O1"), "optimizations.mixed_precison",
     "unknown key optimizations.mixed_precison; did you mean optimizations.mixed_precision?"),
    (with_("profiling.enable", True), "profiling.enable",
     "unknown key profiling.enable; did you mean profiling.enabled?"),
    (with_("reproducibility.seed", 3), "reproducibility.seed",
     "unknown key reproducibility.seed; reproducibility accepts experiment_seed"),
    (with_("retention_policy.log_retention", 3), "retention_policy.log_retention",
     "unknown key retention_policy.log_retention; did you mean retention_policy.log_retention_days?"),
    (with_("integrations.webhooks", {"webhook_names": ["a"]}), "integrations.webhooks.webhook_names",
     "unknown key integrations.webhooks.webhook_names; did you mean integrations.webhooks.webhook_name?"),
    (with_("log_policies", [{"name": "oom", "patern": "OOM"}]), "log_policies[0].patern",
     "unknown key log_policies[0].patern; did you mean log_policies[0].pattern?"),
    # a length is one value: the error is on the length, as for any other bad length
    (with_("min_validation_period", {"batch": 10}), "min_validation_period",
     "unknown key min_validation_period.batch; did you mean min_validation_period.batches?"),
    (with_("searcher.max_length", {"steps": 10}), "searcher.max_length",
     "unknown key searcher.max_length.steps; a length accepts batches, epochs, records"),
    (with_("hyperparameters", {"lr": {"type": "double", "minval": 0, "maxval": 1, "cuont": 3}}),
     "hyperparameters.lr.cuont", "unknown key hyperparameters.lr.cuont; did you mean hyperparameters.lr.count?"),
    (with_("hyperparameters", {"opt": {"inner": {"type": "int", "min": 1, "maxval": 3, "minval": 1}}}),
     "hyperparameters.opt.inner.min",
     "unknown key hyperparameters.opt.inner.min; did you mean hyperparameters.opt.inner.minval?"),
    (with_("hyperparameters", {"c": {"type": "const", "vals": [1]}}), "hyperparameters.c.vals",
     "unknown key hyperparameters.c.vals; did you mean hyperparameters.c.val?"),
    (with_("Searcher", {}), "Searcher", "unknown key Searcher; did you mean searcher?"),
]


@pytest.mark.parametrize(("config", "field", "message"), REFUSED, ids=[r[1] for r in REFUSED])
def test_unknown_key_is_refused_with_the_closest_known_key(config: dict[str, Any], field: str,
                                                           message: str) -> None:
    error = refusal(config)
    assert (error.field, error.message) == (field, message)
    assert isinstance(error, InvalidRequest) and error.status == 400


def test_no_close_key_lists_what_the_level_accepts() -> None:
    error = refusal(with_("zzz", 1))
    assert error.field == "zzz"
    assert error.message.startswith("unknown key zzz; the experiment config accepts bind_mounts, ")
    assert "searcher" in error.message and "workspace" in error.message


def test_every_unknown_key_is_named_in_one_refusal() -> None:
    config = with_("searcher.metrc", "loss", with_("hyperparameter", {}))
    error = refusal(config)
    assert error.field == "searcher.metrc"  # the first in the config's order
    assert error.message == ("unknown key searcher.metrc; did you mean searcher.metric? "
                             "Also unknown: hyperparameter (did you mean hyperparameters?).")


def test_the_typo_of_the_issue_no_longer_runs_with_defaults() -> None:
    text = ("entrypoint: python3 train.py\nsearcher:\n  name: single\n  metric: loss\n"
            "  max_lenght:\n    batches: 300\n")
    with pytest.raises(InvalidConfig, match=r"did you mean searcher\.max_length\?"):
        expand_experiment_config(parse_yaml(text), DEFAULTS, seed=1)


# -- unions: the searcher by name, storage by type -------------------------------------------------

@pytest.mark.parametrize(("searcher", "field", "words"), [
    ({"name": "single", "metric": "m", "max_trials": 4}, "searcher.max_trials",
     "the single searcher does not take max_trials (it is a key of random, adaptive_asha, async_halving)"),
    ({"name": "grid", "metric": "m", "num_rungs": 3}, "searcher.num_rungs",
     "the grid searcher does not take num_rungs (it is a key of async_halving)"),
    ({"name": "random", "metric": "m", "max_trials": 2, "mode": "aggressive"}, "searcher.mode",
     "the random searcher does not take mode (it is a key of adaptive_asha)"),
    ({"name": "adaptive_asha", "metric": "m", "max_trials": 2, "max_time": 8, "time_metric": "batches",
      "num_rungs": 2}, "searcher.num_rungs", "(it is a key of async_halving)"),
    ({"name": "adaptive_asha", "metric": "m", "max_trials": 2, "max_time": 8, "time_metric": "batches",
      "max_rung": 2}, "searcher.max_rung", "did you mean searcher.max_rungs?"),
])
def test_a_key_of_another_searcher_is_refused(searcher: dict[str, Any], field: str, words: str) -> None:
    error = refusal(with_("searcher", searcher))
    assert error.field == field
    assert words in error.message


def test_storage_keys_follow_the_type() -> None:
    error = refusal(with_("checkpoint_storage", {"type": "directory", "container_path": "/c", "host_path": "/h"}))
    assert error.field == "checkpoint_storage.host_path"
    assert "directory checkpoint storage does not take host_path (it is a key of shared_fs)" in error.message


@pytest.mark.parametrize("storage", [
    {"type": "s3", "bucket": "b", "access_key": "a", "secret_key": "s", "endpoint_url": "u", "prefix": "p"},
    {"type": "gcs", "bucket": "b", "prefix": "p"},
    {"type": "azure", "container": "c", "connection_string": "x", "account_url": "u", "credential": "c"},
    {"type": "shared_fs", "host_path": "/h", "storage_path": "s", "propagation": "rprivate",
     "container_path": "/c", "checkpoint_path": "/k", "tensorboard_path": "/t"},
    {"type": "directory", "container_path": "/c", "save_experiment_best": 1, "save_trial_best": 1,
     "save_trial_latest": 1},
    {"save_trial_best": 2, "host_path": "/h"},  # no type: the master's storage under it
])
def test_every_storage_type_takes_its_own_keys(storage: dict[str, Any]) -> None:
    check_experiment_keys(with_("checkpoint_storage", storage))


@pytest.mark.parametrize("searcher", [
    {"name": "single", "metric": "m", "max_length": {"batches": 1}, "smaller_is_better": True,
     "source_trial_id": None, "source_checkpoint_uuid": None},
    {"name": "random", "metric": "m", "max_trials": 2, "max_concurrent_trials": 2, "max_length": 3},
    {"name": "grid", "metric": "m", "max_concurrent_trials": 2},
    {"name": "adaptive_asha", "metric": "m", "max_trials": 2, "max_time": 8, "time_metric": "batches",
     "bracket_rungs": [1], "mode": "standard", "divisor": 4, "max_rungs": 3,
     "max_concurrent_trials": 1, "stop_once": True},
    {"name": "async_halving", "metric": "m", "max_trials": 2, "num_rungs": 2, "divisor": 4,
     "max_concurrent_trials": 1, "stop_once": False, "time_metric": "b", "max_time": 8},
    # end-of-life searchers the schema still lists: their keys pass (the name is refused later)
    {"name": "adaptive", "metric": "m", "budget": {"batches": 9}, "train_stragglers": True},
    {"name": "sync_halving", "metric": "m", "budget": {"batches": 9}, "num_rungs": 2},
    {"name": "adaptive_simple", "metric": "m", "max_trials": 2, "mode": "standard"},
    {"name": "custom", "metric": "m", "unit": "batches"},
    # a null key is still a key, but a null of any searcher's key is harmless
    {"name": "single", "metric": "m", "max_trials": None, "bracket_rungs": None},
    # beyond 0.38.1: every searcher here reads max_time as the length, and stored configs carry
    # max_concurrent_trials for all of them
    {"name": "single", "metric": "m", "max_time": 100, "time_metric": "batches", "max_concurrent_trials": 16},
    # no name (or an unknown one): any searcher's key, and the name is refused by name
    {"metric": "m", "max_trials": 2},
])
def test_every_searcher_takes_its_own_keys(searcher: dict[str, Any]) -> None:
    check_experiment_keys(with_("searcher", searcher))


def test_a_null_unknown_key_is_still_unknown() -> None:
    with pytest.raises(InvalidConfig, match="unknown key searcher.max_lenght;"):
        check_experiment_keys(with_("searcher.max_lenght", None))
    with pytest.raises(InvalidConfig, match="unknown key labelz;"):
        check_experiment_keys(with_("labelz", None))


# -- what stays free ---------------------------------------------------------------------------

GOOD = [
    with_("data", {"anything": {"at": ["any", {"depth": 1}]}}),
    with_("data_layer", {"type": "shared_fs"}),
    with_("environment", {"pod_spec": {"spec": {"containers": [{"name": "x", "anything": 1}]}},
                          "ports": {"web": 8080}, "image": {"cpu": "a", "cuda": "b", "rocm": "c", "gpu": "d"},
                          "environment_variables": {"cpu": ["A=1"], "gpu": ["B=1"]},
                          "proxy_ports": [{"proxy_port": 8080, "proxy_tcp": True, "unauthenticated": False,
                                           "default_service_id": True}],
                          "registry_auth": {"username": "u", "password": "p", "auth": "a", "email": "e",
                                            "serveraddress": "s", "identitytoken": "i", "registrytoken": "r"},
                          "force_pull_image": True, "add_capabilities": ["X"], "drop_capabilities": ["Y"]}),
    with_("hyperparameters", {
        "plain": 1, "listed": [1, {"whatever": 2}], "nested": {"deeper": {"lr": {"type": "log", "minval": -3,
                                                                                  "maxval": -1, "base": 10, "count": 2}},
                                                             "any_name": {"type": "const", "val": {"free": "value"}}},
        "cat": {"type": "categorical", "vals": [{"a": 1}, "b"]},
        "n": {"type": "int", "minval": 1, "maxval": 3, "count": None}}),
    with_("resources", {"slots_per_trial": 2, "max_slots": 4, "weight": 1.5, "priority": 3, "resource_pool": "p",
                        "shm_size": "4G", "is_single_node": True, "native_parallel": False, "agent_label": "",
                        "devices": ["/dev/fuse:/dev/fuse:rwm", {"host_path": "/a", "container_path": "/b",
                                                                 "mode": "r"}]}),
    with_("log_policies", [{"name": "a", "pattern": "x", "action": "cancel_retries"},
                           {"pattern": "y", "action": {"type": "exclude_node"}}, {"name": "b", "pattern": None}]),
    with_("integrations", {"webhooks": {"webhook_id": [1], "webhook_name": ["w"], "exclude": False},
                           "pachyderm": {"pachd": {"host": "h", "port": 1}, "proxy": {"scheme": "http", "host": "h",
                                                                                     "port": 2},
                                         "dataset": {"project": "p", "repo": "r", "commit": "c", "branch": "b",
                                                     "token": "t"}}}),
    with_("security", {"kerberos": {"config_file": "/k"}}),
    with_("pbs", {"slots_per_node": 2, "pbsbatch_args": ["-l x"]}),
    with_("slurm", {"slots_per_node": 2, "gpu_type": "a100", "sbatch_args": ["--x"]}),
    with_("tensorboard_storage", {"type": "s3", "bucket": "b"}),
    with_("optimizations", {"aggregation_frequency": 1, "mixed_precision": "O0"}),
    with_("min_checkpoint_period", {"epochs": 1}, with_("min_validation_period", {"records": 10})),
    with_("labels", ["a"], with_("workspace", None, with_("project", None, with_("internal", None)))),
    # values of a wrong type are not this check's: the type check names them
    with_("environment", "not a mapping"),
    with_("bind_mounts", "not a list"),
]


@pytest.mark.parametrize("config", GOOD)
def test_free_places_and_every_known_key_pass(config: dict[str, Any]) -> None:
    check_experiment_keys(config)


@pytest.mark.parametrize("searcher", [
    {"name": "single", "metric": "m", "max_length": {"batches": 5}},
    {"name": "random", "metric": "m", "max_trials": 2},
    {"name": "grid", "metric": "m"},
    {"name": "adaptive_asha", "metric": "m", "max_trials": 2, "max_time": 8, "time_metric": "batches"},
    {"name": "async_halving", "metric": "m", "max_trials": 2, "num_rungs": 2, "max_time": 8, "time_metric": "b"},
])
def test_a_stored_config_submitted_again_passes(searcher: dict[str, Any]) -> None:
    """`det e config ID > c.yaml && det e create c.yaml`: the expanded config must pass."""
    config = with_("hyperparameters", {"a": {"type": "int", "minval": 1, "maxval": 2, "count": 2}, "b": 1},
                   with_("searcher", searcher))
    stored = expand_experiment_config(config, DEFAULTS, seed=3)
    again = expand_experiment_config(yaml.safe_load(yaml.safe_dump(stored)), DEFAULTS, seed=3)
    assert again == stored


# -- templates and tasks ---------------------------------------------------------------------

def test_a_template_takes_any_part_of_an_experiment_or_a_task_config() -> None:
    check_template_keys({})
    check_template_keys({"description": "d", "idle_timeout": "10m", "notebook_idle_type": "activity",
                         "work_dir": "/w", "tensorboard_args": ["--x"], "searcher": {"metric": "m"},
                         "resources": {"slots": 1, "slots_per_trial": 2},
                         "checkpoint_storage": {"save_trial_best": 3},
                         "environment": {"environment_variables": ["A=1"]}})


@pytest.mark.parametrize(("config", "message"), [
    ({"descripton": "x"}, "unknown key descripton; did you mean description?"),
    ({"checkpoint_storage": {"save_trial_bset": 1}},
     "unknown key checkpoint_storage.save_trial_bset; did you mean checkpoint_storage.save_trial_best?"),
    ({"idle_timout": "1m"}, "unknown key idle_timout; did you mean idle_timeout?"),
])
def test_a_template_typo_is_refused(config: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        check_template_keys(config)
    assert info.value.message == message


def test_template_service_refuses_a_typo_as_a_400() -> None:
    from det_jupyter.services.experiments.templates import check_config

    with pytest.raises(InvalidRequest, match="did you mean bind_mounts"):
        check_config({"bind_mount": []})
    assert check_config({"bind_mounts": []}) == {"bind_mounts": []}


@pytest.mark.parametrize(("kind", "config"), [
    ("COMMAND", {"entrypoint": ["true"], "description": "d", "resources": {
        "slots": 0, "max_slots": 1, "weight": 1, "native_parallel": False, "shm_size": 1, "resource_pool": "p",
        "priority": 3, "is_single_node": None, "devices": ["/a:/b"]}, "debug": False,
        "bind_mounts": [{"host_path": "/a", "container_path": "/b", "anything": 1}],
        "environment": {"environment_variables": ["A=1"], "image": "x", "pod_spec": {"a": 1},
                        "registry_auth": {"username": "u"}, "proxy_ports": [{"proxy_port": 1}]},
        "pbs": {"slots_per_node": 1}, "slurm": {"gpu_type": "x"}}),
    ("NOTEBOOK", {"idle_timeout": "10m", "notebook_idle_type": "activity", "work_dir": "/w"}),
    ("SHELL", {"idle_timeout": None}),
    ("TENSORBOARD", {"experiment_ids": [1], "trial_ids": None, "tensorboard_args": ["--x"]}),
])
def test_task_configs_take_commandconfig_keys(kind: str, config: dict[str, Any]) -> None:
    check_task_keys(config, kind)


@pytest.mark.parametrize(("config", "field", "message"), [
    ({"entrypoint": ["true"], "resources": {"slots_per_trial": 1}}, "resources.slots_per_trial",
     "unknown key resources.slots_per_trial; did you mean resources.slots?"),
    ({"idle_timout": "1m"}, "idle_timout", "unknown key idle_timout; did you mean idle_timeout?"),
    ({"slots": 1}, "slots", "unknown key slots; did you mean resources.slots?"),
    ({"environment": {"environment_variabels": []}}, "environment.environment_variabels",
     "unknown key environment.environment_variabels; did you mean environment.environment_variables?"),
    ({"experiment_ids": [1]}, "experiment_ids", None),  # only a TensorBoard's route adds these
    ({"searcher": {"name": "single"}}, "searcher", None),  # an experiment's key, not a task's
])
def test_task_config_typo_is_refused(config: dict[str, Any], field: str, message: str | None) -> None:
    with pytest.raises(InvalidConfig) as info:
        check_task_keys(config, "NOTEBOOK")
    assert info.value.field == field
    if message is not None:
        assert info.value.message == message


def test_an_experiment_template_still_serves_a_task() -> None:
    """0.38.1 reads a template into a task leniently: what a task does not take is dropped."""
    template = {"description": "t", "searcher": {"name": "single"}, "hyperparameters": {"a": 1},
                "resources": {"slots_per_trial": 2, "resource_pool": "gpu"},
                "environment": {"environment_variables": ["A=1"], "pod_spec": {"x": 1}, "nope": 1},
                "bind_mounts": [{"host_path": "/a", "container_path": "/a", "read_only": True}]}
    pruned = task_keys_only(template)
    assert pruned == {"description": "t", "resources": {"resource_pool": "gpu"},
                      "environment": {"environment_variables": ["A=1"], "pod_spec": {"x": 1}},
                      "bind_mounts": template["bind_mounts"]}
    check_task_keys(pruned, "NOTEBOOK")
    assert template["searcher"] == {"name": "single"}  # the input is left alone


# -- every config 0.38.1 accepts ----------------------------------------------------------------

def _experiment_configs(texts: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, text in texts.items():
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and "searcher" in data:
            out[name] = data
    return out


FIXTURE_CONFIGS = _experiment_configs({p.name: p.read_text() for p in sorted(FIXTURES.glob("*.yaml"))})


def test_the_fixture_sample_is_there() -> None:
    assert len(FIXTURE_CONFIGS) >= 15


@pytest.mark.parametrize("name", sorted(FIXTURE_CONFIGS))
def test_determined_example_configs_pass(name: str) -> None:
    """A sample of 0.38.1's example configs, all through validation and expansion."""
    config = FIXTURE_CONFIGS[name]
    assert unknown_keys(config) == []
    expand_experiment_config(config, DEFAULTS, seed=1)


def _mirror_texts() -> dict[str, str]:
    git = shutil.which("git")
    if git is None or not MIRROR.is_dir():
        pytest.skip(f"no Determined v0.38.1 mirror at {MIRROR} (set DET_MIRROR): the committed "
                    "sample in fixtures/det_examples is checked instead")
    listing = subprocess.run([git, "-C", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD",
                              "examples", "e2e_tests", "harness/tests"],
                             capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for path in listing:
        if re.search(r"\.ya?ml$", path):
            texts[path] = subprocess.run([git, "-C", str(MIRROR), "show", f"HEAD:{path}"],
                                         capture_output=True, text=True, check=True).stdout
    return texts


def test_every_determined_example_config_in_the_mirror_passes() -> None:
    configs = _experiment_configs(_mirror_texts())
    assert len(configs) > 40
    refused = {name: [p.message for p in unknown_keys(c)] for name, c in configs.items() if unknown_keys(c)}
    assert refused == {}


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*/*.yaml")), ids=lambda p: p.parent.name + "/" + p.name)
def test_our_example_configs_pass(path: Path) -> None:
    expand_experiment_config(parse_yaml(path.read_text()), DEFAULTS, seed=1)


def test_the_legacy_unnamed_log_policy_still_passes() -> None:
    """0.38.1 takes a pre-0.38 policy (a pattern and an action, no name)."""
    config = with_("log_policies", [{"pattern": ".*OOM.*", "action": {"type": "cancel_retries"}}])
    expand_experiment_config(config, DEFAULTS, seed=1)
