"""The resource configuration: Determined's master.yaml keys, defaults, and errors that name the key."""

from __future__ import annotations

import pytest

from det_jupyter.config.resources import load_master_config, parse_resources


def test_nothing_given_is_one_default_priority_pool() -> None:
    cfg = parse_resources(None)
    assert list(cfg.pools) == ["default"]
    assert (cfg.default_compute_pool, cfg.default_aux_pool) == ("default", "default")
    sched = cfg.pools["default"].scheduler
    assert (sched.type, sched.fitting_policy, sched.preemption, sched.default_priority) == (
        "priority", "best", False, 42)


def test_pool_scheduler_replaces_the_managers_as_a_whole() -> None:
    cfg = load_master_config("""
resource_manager:
  type: agent
  default_compute_resource_pool: gpu
  default_aux_resource_pool: cpu
  scheduler: {type: priority, preemption: true, fitting_policy: worst, default_priority: 10}
resource_pools:
  - pool_name: gpu
    description: the A100 boxes
  - pool_name: cpu
    scheduler: {fitting_policy: best}
  - pool_name: shared
    scheduler: {type: fair_share}
port: 8080
""")
    assert cfg.pools["gpu"].description == "the A100 boxes"
    gpu = cfg.pools["gpu"].scheduler
    assert (gpu.type, gpu.fitting_policy, gpu.preemption, gpu.default_priority) == ("priority", "worst", True, 10)
    # Not inherited field by field: an unset type is priority, preemption off, priority 42.
    cpu = cfg.pools["cpu"].scheduler
    assert (cpu.type, cpu.fitting_policy, cpu.preemption, cpu.default_priority) == ("priority", "best", False, 42)
    assert cfg.pools["shared"].scheduler.preemption is True  # fair share always preempts
    assert cfg.pool_for("", 2) == "gpu" and cfg.pool_for("", 0) == "cpu"
    assert cfg.pool_for("shared", 0) == "shared"


def test_first_pool_is_the_default_when_none_is_named() -> None:
    cfg = parse_resources({}, [{"pool_name": "a"}, {"pool_name": "b"}])
    assert (cfg.default_compute_pool, cfg.default_aux_pool) == ("a", "a")


@pytest.mark.parametrize(
    ("rm", "pools", "message"),
    [
        ({"type": "slurm"}, None, "resource_manager.type must be agent or kubernetes"),
        ({"schedular": {}}, None, "resource_manager: unknown key(s) schedular"),
        ({"scheduler": {"type": "lottery"}}, None, "resource_manager.scheduler.type must be one of"),
        ({"scheduler": {"fitting_policy": "tight"}}, None, "fitting_policy must be best or worst"),
        ({"scheduler": {"type": "fair_share", "preemption": False}}, None, "always preempts"),
        ({"scheduler": {"type": "round_robin", "preemption": True}}, None, "does not preempt"),
        ({"scheduler": {"default_priority": 0}}, None, "default_priority must be an integer from 1 to 99"),
        ({"scheduler": {"preemption": "yes"}}, None, "preemption must be true or false"),
        ({}, [], "resource_pools must be a non-empty list"),
        ({}, [{"pool_name": "a"}, {"pool_name": "a"}], "resource_pools[1].pool_name: pool 'a' is defined twice"),
        ({}, [{"name": "a"}], "resource_pools[0]: unknown key(s) name"),
        ({}, [{"pool_name": ""}], "resource_pools[0].pool_name must be a non-empty string"),
        ({"default_compute_resource_pool": "gpu"}, [{"pool_name": "a"}],
         "default_compute_resource_pool: pool 'gpu' is not among resource_pools (a)"),
        ({}, [{"pool_name": "a", "scheduler": {"type": "x"}}], "resource_pools[0].scheduler.type"),
    ],
)
def test_bad_settings_name_the_key(rm: dict, pools: list | None, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_resources(rm, pools)
    assert message in str(err.value)


def test_bad_yaml_and_unknown_pools_are_explained() -> None:
    with pytest.raises(ValueError, match="not valid YAML"):
        load_master_config("resource_manager: [")
    cfg = parse_resources(None)
    with pytest.raises(ValueError, match="resource pool 'gpu' does not exist; the pools are default"):
        cfg.check_pool("gpu")
    cfg.check_pool("")  # "" means the default pool

