"""The TaskSpec builders: exact environment for each container of a gang."""

from __future__ import annotations

import json
from types import SimpleNamespace

from det_jupyter.services.allocation.gang import (
    PORT_BASE,
    PORT_BLOCK,
    PORT_BLOCKS,
    Container,
    Gang,
    free_port,
)
from det_jupyter.services.allocation.spec import (
    TrialRun,
    build_trial_spec,
    gang_env,
    master_env,
    task_env,
)

IDENT = SimpleNamespace(url="http://10.0.0.9:8080", master_id="m-1", cluster_id="c-1")
GANG = Gang((Container("a", (0, 1), "10.0.0.1"), Container("b", (3,), "10.0.0.2")), 29404, 29405)


def test_gang_env_is_the_same_gang_seen_from_each_rank() -> None:
    chief, worker = gang_env(GANG, 0), gang_env(GANG, 1)
    assert chief == {
        "DET_CONTAINER_RANK": "0", "DET_CONTAINER_ADDRS": '["10.0.0.1", "10.0.0.2"]',
        "DET_CONTAINER_SLOT_COUNTS": "[2, 1]", "DET_RENDEZVOUS_PORT": "29404",
        "DET_COLLECTIVE_PORT": "29405", "DET_CHIEF_IP": "10.0.0.1", "C10D_PORT": "29404",
        "INTER_TRAIN_PROCESS_COMM_PORT_1": "29406", "INTER_TRAIN_PROCESS_COMM_PORT_2": "29407",
    }
    assert {k: v for k, v in worker.items() if chief[k] != v} == {"DET_CONTAINER_RANK": "1"}


def test_master_and_task_identity() -> None:
    assert master_env(IDENT) == {
        "DET_MASTER": "http://10.0.0.9:8080", "DET_MASTER_HOST": "10.0.0.9",
        "DET_MASTER_ADDR": "10.0.0.9", "DET_MASTER_PORT": "8080", "DET_MASTER_ID": "m-1",
        "DET_CLUSTER_ID": "c-1", "DET_USE_TLS": "false",
    }
    env = task_env("7.x", "7.x.2", 1, "tok", "alice", "TRIAL")
    assert env["DET_RESOURCES_ID"] == "7.x.2.r1"  # one per container: the rendezvous route's rank
    assert json.loads(env["DET_TASK_LOGGING_METADATA"]) == {"task_id": "7.x", "allocation_id": "7.x.2"}


def test_trial_spec_per_container() -> None:
    cfg = {"entrypoint": "python3 train.py", "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"}}
    run = TrialRun(allocation_id="7.x.2", task_id="7.x", trial_id=3, experiment_id=7, run_id=2, seed=11,
                   hparams={"lr": 0.1}, latest_checkpoint="u-1", steps=40, config=cfg,
                   config_json=json.dumps(cfg), owner="alice")
    spec = build_trial_spec(run, GANG, 1, "tok", IDENT).to_wire()
    assert (spec["slot_ids"], spec["entrypoint"], spec["task_type"]) == ([3], "python3 train.py", "TRIAL")
    env = spec["env"]
    assert (env["DET_TRIAL_RUN_ID"], env["DET_STEPS_COMPLETED"], env["DET_LATEST_CHECKPOINT"]) == ("2", "40", "u-1")
    assert spec["mounts"] == [{"host_path": "/ckpt", "container_path": "/determined_shared_fs"}]
    rendezvous = spec["info_files"]["rendezvous.json"]
    assert (rendezvous["container_addrs"], rendezvous["container_rank"]) == (["10.0.0.1", "10.0.0.2"], 1)


def test_port_blocks_skip_those_in_use() -> None:
    assert free_port(set()) == 29400
    assert free_port({29400, 29404}) == 29408


def test_port_blocks_stay_below_the_ephemeral_range() -> None:
    """An outgoing connection can hold a port from 32768 up at any moment (Linux's default
    ip_local_port_range): a gang bound there failed a CI run with EADDRINUSE."""
    ports = {free_port(set(), block) for block in range(PORT_BLOCKS + 5)}
    assert len(ports) == PORT_BLOCKS
    assert min(ports) == PORT_BASE and max(ports) + PORT_BLOCK - 1 < 32768


def test_each_container_gets_the_image_and_variables_of_its_slots_device_type() -> None:
    """0.38.1's per-device ``environment.image`` and ``environment_variables``: a container on
    cuda slots gets the cuda entries, one on cpu slots the cpu entries."""
    cfg = {"entrypoint": "python3 train.py", "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"},
           "environment": {"image": {"cpu": "team/cpu:1", "cuda": "team/gpu:1", "rocm": "team/rocm:1"},
                           "environment_variables": {"cpu": ["WHERE=cpu"], "cuda": ["WHERE=cuda"]}}}
    run = TrialRun(allocation_id="7.x.2", task_id="7.x", trial_id=3, experiment_id=7, run_id=1, seed=11,
                   hparams={}, latest_checkpoint=None, steps=0, config=cfg, config_json=json.dumps(cfg),
                   owner="alice")
    gang = Gang((Container("g", (0,), "10.0.0.1", "cuda"), Container("c", (0,), "10.0.0.2", "cpu")), 29404, 29405)
    on_gpu, on_cpu = (build_trial_spec(run, gang, rank, "tok", IDENT) for rank in (0, 1))
    assert on_gpu.container is not None and on_gpu.container.image == "team/gpu:1"
    assert on_cpu.container is not None and on_cpu.container.image == "team/cpu:1"
    assert (on_gpu.env["WHERE"], on_cpu.env["WHERE"]) == ("cuda", "cpu")
