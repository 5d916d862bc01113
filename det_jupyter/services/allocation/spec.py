"""Pure builders of a TaskSpec (docs/internals.md, ``det_agent.wire.TaskSpec``) and its parts:
what every task of a gang is told about its master, itself and its gang. Trials and commands
compose them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from det_agent.wire import Mount, RunAs, TaskSpec

from ... import config as expconf
from ..accounts.auth import AgentUserGroup
from .cluster_info import build_info_files
from .gang import Gang

SHARED_FS_CONTAINER_PATH = "/determined_shared_fs"


class MasterAddress(Protocol):
    """How tasks reach their master (``common.identity.MasterIdentity``)."""

    @property
    def url(self) -> str: ...

    @property
    def master_id(self) -> str: ...

    @property
    def cluster_id(self) -> str: ...


@dataclass(frozen=True)
class TrialRun:
    """One run of a trial, as its TaskSpecs need it: the trial (``trial_id``, ``seed``,
    ``hparams``, its ``latest_checkpoint`` to resume from at ``steps``), its experiment's
    expanded ``config`` (and that as JSON, made once per experiment), its owner's user name,
    and ``context_digest`` (``sha256:<hex>`` of the context archive; None: no context)."""

    allocation_id: str
    task_id: str
    trial_id: int
    experiment_id: int
    run_id: int
    seed: int
    hparams: Mapping[str, Any]
    latest_checkpoint: str | None
    steps: int
    config: Mapping[str, Any]
    config_json: str
    owner: str
    context_digest: str | None = None


def master_env(ident: MasterAddress) -> dict[str, str]:
    """How the task reaches its master."""
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


def with_run_as(spec: TaskSpec, link: AgentUserGroup | None) -> TaskSpec:
    """``spec`` with its owner's identity on agents: ``run_as`` where the owner is linked
    with an agent user, no ``run_as`` where not (the agent's default task account). The
    allocation service applies it to every spec of every kind it places, with the owner's
    link as of the placement (``AuthService.open_task_sessions``)."""
    run_as = None if link is None else RunAs(link.uid, link.gid, link.user, link.group)
    return dataclasses.replace(spec, run_as=run_as)


def with_user_token(spec: TaskSpec, user_token: str) -> TaskSpec:
    """``spec`` with its owner's user token (``DET_USER_TOKEN``, one per allocation)."""
    return dataclasses.replace(spec, env={**spec.env, "DET_USER_TOKEN": user_token})


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


def build_trial_spec(run: TrialRun, gang: Gang, rank: int, token: str, ident: MasterAddress) -> TaskSpec:
    """The TaskSpec of container ``rank`` of a trial's run."""
    me = gang.containers[rank]
    agent_id, slot_ids = me.agent_id, list(me.slot_ids)
    addrs = [c.address for c in gang.containers]
    counts = [len(c.slot_ids) for c in gang.containers]
    cfg = dict(run.config)
    storage = cfg.get("checkpoint_storage") or {}
    env = {
        **expconf.environment_variables(cfg, me.slot_type),
        **master_env(ident),
        **task_env(run.task_id, run.allocation_id, rank, token, run.owner, "TRIAL"),
        "DET_EXPERIMENT_ID": str(run.experiment_id),
        "DET_TRIAL_ID": str(run.trial_id),
        "DET_TRIAL_RUN_ID": str(run.run_id),
        "DET_TRIAL_SEED": str(run.seed),
        "DET_HPARAMS": json.dumps(run.hparams),
        "DET_EXPERIMENT_CONFIG": run.config_json,
        "DET_STEPS_COMPLETED": str(run.steps),
        **gang_env(gang, rank),
    }
    if run.latest_checkpoint:
        env["DET_LATEST_CHECKPOINT"] = run.latest_checkpoint
    mounts = []
    if storage.get("type") == "shared_fs" and storage.get("host_path"):
        env["DET_SHARED_FS_HOST_PATH"] = storage["host_path"]
        mounts.append(Mount(storage["host_path"], storage.get("container_path") or SHARED_FS_CONTAINER_PATH))
    info = build_info_files(
        master_url=ident.url,
        cluster_id=ident.cluster_id,
        agent_id=agent_id,
        slot_ids=slot_ids,
        task_id=run.task_id,
        allocation_id=run.allocation_id,
        session_token=token,
        task_type="TRIAL",
        latest_checkpoint=run.latest_checkpoint,
        trial={
            "trial_id": run.trial_id,
            "experiment_id": run.experiment_id,
            "trial_seed": run.seed,
            "hparams": run.hparams,
            "config": run.config,
            "steps_completed": run.steps,
            "trial_run_id": run.run_id,
            "debug": bool(cfg.get("debug")),
            "inter_node_network_interface": None,
        },
        container_addrs=addrs,
        container_rank=rank,
        container_slot_counts=counts,
        gpu_uuids=[],
    )
    entrypoint = expconf.trial_entrypoint(
        cfg["entrypoint"], int((cfg.get("resources") or {}).get("slots_per_trial") or 1))
    return TaskSpec(
        task_id=run.task_id,
        allocation_id=run.allocation_id,
        task_type="TRIAL",
        entrypoint=entrypoint if isinstance(entrypoint, str) else tuple(entrypoint),
        env=env,
        slot_ids=tuple(slot_ids),
        context_url=f"/api/v1/tasks/{run.task_id}/context_directory",
        info_files=info,
        mounts=tuple(mounts),
        context_digest=run.context_digest,
        # environment.image (the entry of its slots' device type): a container of it (the
        # agent's Docker runtime); none: a process.
        container=expconf.container_for(cfg, me.slot_type),
    )
