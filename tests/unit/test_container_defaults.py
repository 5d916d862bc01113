"""The master's task_container_defaults (0.38.1's key): read, checked, and merged under task
configs as 0.38.1 merges them (the config wins; lists are joined)."""

from __future__ import annotations

import pytest

from det_jupyter import config as expconf
from det_jupyter.config.resources import load_master_config, parse_resources


def test_the_merged_keys_become_a_task_config_fragment() -> None:
    fragment = expconf.container_defaults({
        "image": {"cpu": "team/cpu:1", "cuda": "team/gpu:1"},
        "environment_variables": ["A=1"], "force_pull_image": True,
        "add_capabilities": ["SYS_PTRACE"], "shm_size_bytes": 1 << 30,
        "bind_mounts": [{"host_path": "/data", "container_path": "/data", "read_only": True}],
        "devices": ["/dev/fuse:/dev/fuse:rwm"],
        "network_mode": "host", "cpu_pod_spec": {"spec": {}},  # taken, not used here
    })
    assert fragment == {
        "environment": {"image": {"cpu": "team/cpu:1", "cuda": "team/gpu:1"},
                        "environment_variables": ["A=1"], "force_pull_image": True,
                        "add_capabilities": ["SYS_PTRACE"]},
        "bind_mounts": [{"host_path": "/data", "container_path": "/data", "read_only": True}],
        "resources": {"devices": ["/dev/fuse:/dev/fuse:rwm"], "shm_size": 1 << 30},
    }


@pytest.mark.parametrize(("raw", "words"), [
    ({"imgae": "x"}, "unknown key(s) imgae"),
    ({"add_capabilities": ["SYS_WIZARD"]}, "unknown capability"),
    ({"bind_mounts": [{"host_path": "data", "container_path": "/data"}]}, "absolute path"),
    ({"shm_size_bytes": "lots"}, "not a size"),
    ("ubuntu", "must be a mapping"),
])
def test_a_bad_key_stops_the_master_naming_it(raw: object, words: str) -> None:
    with pytest.raises(ValueError) as err:
        expconf.container_defaults(raw, "resource_pools[0].task_container_defaults")
    assert words in str(err.value) and "task_container_defaults" in str(err.value)


def test_the_config_wins_and_lists_are_joined() -> None:
    fragment = expconf.container_defaults({
        "image": "team/base:1", "environment_variables": ["A=1", "B=1"], "force_pull_image": True,
        "bind_mounts": [{"host_path": "/data", "container_path": "/data"},
                        {"host_path": "/scratch", "container_path": "/scratch"}],
        "shm_size_bytes": 1 << 30,
    })
    mine = {"entrypoint": "x", "environment": {"image": "mine:2", "environment_variables": ["B=2"]},
            "bind_mounts": [{"host_path": "/my-data", "container_path": "/data"}],
            "resources": {"shm_size": "2G"}}
    out = expconf.apply_container_defaults(mine, fragment)
    assert out["environment"] == {"image": "mine:2", "environment_variables": ["A=1", "B=1", "B=2"],
                                  "force_pull_image": True}
    assert out["bind_mounts"] == [{"host_path": "/scratch", "container_path": "/scratch"},
                                  {"host_path": "/my-data", "container_path": "/data"}]
    assert out["resources"] == {"shm_size": "2G"}
    assert mine["environment"] == {"image": "mine:2", "environment_variables": ["B=2"]}  # not mutated
    bare = expconf.apply_container_defaults({"entrypoint": "x"}, fragment)
    assert bare["environment"]["image"] == "team/base:1" and bare["resources"]["shm_size"] == 1 << 30


def test_per_device_variables_join_per_device() -> None:
    fragment = expconf.container_defaults({"environment_variables": {"cpu": ["A=1"], "cuda": ["G=1"]}})
    out = expconf.apply_container_defaults({"environment": {"environment_variables": ["B=2"]}}, fragment)
    assert out["environment"]["environment_variables"] == {
        "cpu": ["A=1", "B=2"], "cuda": ["G=1", "B=2"], "rocm": ["B=2"]}


def test_a_pools_own_defaults_replace_the_clusters() -> None:
    resources = load_master_config("""
task_container_defaults: {image: cluster/img:1}
resource_pools:
  - pool_name: default
  - pool_name: gpus
    task_container_defaults: {image: gpus/img:1, environment_variables: [NCCL_DEBUG=INFO]}
""")
    assert resources.container_defaults_for("", 1) == {"environment": {"image": "cluster/img:1"}}
    assert resources.container_defaults_for("gpus", 1) == {
        "environment": {"image": "gpus/img:1", "environment_variables": ["NCCL_DEBUG=INFO"]}}
    assert parse_resources(None).container_defaults_for("", 1) is None


def test_an_experiment_gets_its_pools_image_and_runs_in_a_container() -> None:
    resources = parse_resources(None, [{"pool_name": "default"}, {"pool_name": "gpus",
                                        "task_container_defaults": {"image": "gpus/img:1"}}],
                                {"image": "cluster/img:1"})
    defaults = expconf.MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/ckpt"},
                                      container_defaults=resources.container_defaults_for)
    base = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "loss",
                                                           "max_length": {"batches": 1}}}
    in_gpus = expconf.expand_experiment_config({**base, "resources": {"resource_pool": "gpus"}},
                                               defaults, seed=1)
    assert in_gpus["environment"]["image"] == {"cpu": "gpus/img:1", "cuda": "gpus/img:1", "rocm": "gpus/img:1"}
    container = expconf.container_for(in_gpus, "cpu")
    assert container is not None and container.image == "gpus/img:1"
    assert container.shm_size == expconf.DEFAULT_SHM_SIZE  # 0.38.1's 4 GiB when nothing says
    plain = expconf.expand_experiment_config(base, defaults, seed=1)
    assert expconf.container_for(plain, "cpu").image == "cluster/img:1"  # type: ignore[union-attr]
    # without any defaults an experiment that names no image stays a process
    bare = expconf.expand_experiment_config(base, expconf.MasterDefaults(
        checkpoint_storage={"type": "shared_fs", "host_path": "/ckpt"}), seed=1)
    assert expconf.container_for(bare, "cpu") is None
