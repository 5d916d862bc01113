"""Pure builders of a TaskSpec's parts (docs/internals.md): what every task of a gang is told
about its master, itself and its gang. Trials and commands compose them."""

from __future__ import annotations

import json
from typing import Any

from ... import config as expconf
from ..accounts.auth import AgentUserGroup
from .cluster_info import build_info_files
from .gang import Gang

SHARED_FS_CONTAINER_PATH = "/determined_shared_fs"


def master_env(ident: Any) -> dict[str, str]:
    """How the task reaches its master (``ident``: a trials.MasterIdentity)."""
    host_port = ident.url.split("://", 1)[-1].rstrip("/")
    host, _, port = host_port.rpartition(":")
    return {
        "DET_MASTER": ident.url, "DET_MASTER_HOST": host, "DET_MASTER_ADDR": host,
        "DET_MASTER_PORT": port, "DET_MASTER_ID": ident.master_id,
        "DET_CLUSTER_ID": ident.cluster_id, "DET_USE_TLS": "false",
    }


def task_env(
    task_id: str, allocation_id: str, rank: int, token: str, owner: str, task_type: str
) -> dict[str, str]:
    """Who the task is: its ids (one resources id per container), token and user."""
    return {
        "DET_TASK_ID": task_id, "DET_ALLOCATION_ID": allocation_id,
        "DET_RESOURCES_ID": f"{allocation_id}.r{rank}", "DET_SESSION_TOKEN": token,
        "DET_USER": owner, "DET_TASK_TYPE": task_type,
        "DET_TASK_LOGGING_METADATA": json.dumps({"task_id": task_id, "allocation_id": allocation_id}),
    }


def with_run_as(spec: dict, link: AgentUserGroup | None) -> dict:
    """``spec`` with its owner's identity on agents: ``run_as`` where the owner is linked
    with an agent user, no ``run_as`` where not (the agent's default task account). The
    allocation service applies it to every spec of every kind it places, with the owner's
    link as of the placement (``AuthService.open_task_sessions``)."""
    if link is not None:
        spec["run_as"] = link.run_as()
    else:
        spec.pop("run_as", None)
    return spec


def gang_env(gang: Gang, rank: int) -> dict[str, str]:
    """The gang, for our launcher and collectives and for the stock launcher
    (docs/internals.md "Distributed trials")."""
    addrs = [c.address for c in gang.containers]
    return {
        "DET_CONTAINER_RANK": str(rank),
        "DET_CONTAINER_ADDRS": json.dumps(addrs),
        "DET_CONTAINER_SLOT_COUNTS": json.dumps([len(c.slot_ids) for c in gang.containers]),
        "DET_RENDEZVOUS_PORT": str(gang.rendezvous_port),
        "DET_COLLECTIVE_PORT": str(gang.collective_port),
        "DET_CHIEF_IP": addrs[0],
        # The stock launcher's torch port and its DistributedContext's ZMQ ports, so two gangs
        # on one host do not collide.
        "C10D_PORT": str(gang.rendezvous_port),
        "INTER_TRAIN_PROCESS_COMM_PORT_1": str(gang.rendezvous_port + 2),
        "INTER_TRAIN_PROCESS_COMM_PORT_2": str(gang.rendezvous_port + 3),
    }


def trial_spec(
    alloc: Any, trial: Any, exp_id: int, cfg: dict, cfg_json: str, owner: str, run_id: int,
    steps: int, gang: Gang, rank: int, token: str, ident: Any,
) -> dict:
    """The TaskSpec of container ``rank`` of a trial's run: resuming from ``trial``'s latest
    checkpoint at ``steps``; ``cfg_json`` is ``cfg`` as JSON (made once per experiment)."""
    me = gang.containers[rank]
    agent_id, slot_ids = me.agent_id, list(me.slot_ids)
    addrs = [c.address for c in gang.containers]
    counts = [len(c.slot_ids) for c in gang.containers]
    storage = cfg.get("checkpoint_storage") or {}
    env = {
        **expconf.environment_variables(cfg, "cpu"),
        **master_env(ident),
        **task_env(trial.task_id, alloc.allocation_id, rank, token, owner, "TRIAL"),
        "DET_EXPERIMENT_ID": str(exp_id),
        "DET_TRIAL_ID": str(trial.id),
        "DET_TRIAL_RUN_ID": str(run_id),
        "DET_TRIAL_SEED": str(trial.seed),
        "DET_HPARAMS": json.dumps(trial.hparams),
        "DET_EXPERIMENT_CONFIG": cfg_json,
        "DET_STEPS_COMPLETED": str(steps),
        **gang_env(gang, rank),
    }
    if trial.latest_checkpoint:
        env["DET_LATEST_CHECKPOINT"] = trial.latest_checkpoint
    mounts = []
    if storage.get("type") == "shared_fs" and storage.get("host_path"):
        env["DET_SHARED_FS_HOST_PATH"] = storage["host_path"]
        mounts.append({
            "host_path": storage["host_path"],
            "container_path": storage.get("container_path") or SHARED_FS_CONTAINER_PATH,
        })
    info = build_info_files(
        master_url=ident.url,
        cluster_id=ident.cluster_id,
        agent_id=agent_id,
        slot_ids=slot_ids,
        task_id=trial.task_id,
        allocation_id=alloc.allocation_id,
        session_token=token,
        task_type="TRIAL",
        latest_checkpoint=trial.latest_checkpoint,
        trial={
            "trial_id": trial.id,
            "experiment_id": exp_id,
            "trial_seed": trial.seed,
            "hparams": trial.hparams,
            "config": cfg,
            "steps_completed": steps,
            "trial_run_id": run_id,
            "debug": bool(cfg.get("debug")),
            "inter_node_network_interface": None,
        },
        container_addrs=addrs,
        container_rank=rank,
        container_slot_counts=counts,
        gpu_uuids=[],
    )
    return {
        "task_id": trial.task_id,
        "allocation_id": alloc.allocation_id,
        "task_type": "TRIAL",
        "entrypoint": expconf.trial_entrypoint(
            cfg["entrypoint"], int((cfg.get("resources") or {}).get("slots_per_trial") or 1)),
        "env": env,
        "slot_ids": slot_ids,
        "context_url": f"/api/v1/tasks/{trial.task_id}/context_directory",
        "info_files": info,
        "mounts": mounts,
    }
