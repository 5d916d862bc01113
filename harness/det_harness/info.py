"""What a task knows about itself, read from the ``DET_*`` environment the master sets.

See docs/internals.md "Task environment". ``get_cluster_info()`` returns ``None`` off-cluster
(no ``DET_MASTER`` or no ``DET_TASK_ID``), which makes ``core.init()`` pick local implementations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrialInfo:
    """The trial this process trains (present only for ``TRIAL`` tasks)."""

    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    steps_completed: int
    run_id: int


@dataclass(frozen=True)
class ClusterInfo:
    """The task, its allocation and the master it talks to."""

    master_url: str
    cluster_id: str
    agent_id: str
    task_id: str
    allocation_id: str
    session_token: str
    task_type: str
    slot_ids: list[int] = field(default_factory=list)
    latest_checkpoint: str | None = None
    trial: TrialInfo | None = None
    #: This container's rank among the trial's containers (0 is the chief's container).
    container_rank: int = 0
    #: One host address per container of the allocation, in container-rank order.
    container_addrs: list[str] = field(default_factory=lambda: ["127.0.0.1"])
    #: One slot count per container, in container-rank order ([] means ``[len(slot_ids) or 1]``).
    container_slot_counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.container_slot_counts:
            object.__setattr__(self, "container_slot_counts", [len(self.slot_ids) or 1])
        check_topology(self.container_rank, self.container_addrs, self.container_slot_counts)

    @property
    def user_data(self) -> dict[str, Any]:
        """The experiment config's ``data`` section ({} when absent or not a trial)."""
        if self.trial is None:
            return {}
        data = self.trial.config.get("data")
        return data if isinstance(data, dict) else {}


def _json_env(env: dict[str, str], key: str, default: Any) -> Any:
    raw = env.get(key)
    if not raw:
        return default
    import json

    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable {key} is not valid JSON ({exc}); "
                         "it is set by the master, so check the task's spec") from exc


def _int_env(env: dict[str, str], key: str, default: int = 0) -> int:
    raw = env.get(key, "")
    try:
        return int(raw) if raw != "" else default
    except ValueError as exc:
        raise ValueError(f"environment variable {key}={raw!r} must be an integer") from exc


def check_topology(rank: int, addrs: list[str], slot_counts: list[int]) -> None:
    """Raise ValueError unless ``rank`` indexes ``addrs`` and the two lists match in length."""
    if not addrs or len(addrs) != len(slot_counts):
        raise ValueError(f"container_addrs {addrs!r} and container_slot_counts {slot_counts!r} "
                         "must be non-empty and of the same length (one entry per container)")
    if not 0 <= rank < len(addrs):
        raise ValueError(f"container_rank {rank} must be in [0, {len(addrs)}) "
                         f"for container_addrs {addrs!r}")
    if any(not isinstance(c, int) or c < 0 for c in slot_counts):
        raise ValueError(f"container_slot_counts {slot_counts!r} must be integers >= 0")


def read_topology(environ: dict[str, str] | None = None) -> tuple[int, list[str], list[int]]:
    """``(container_rank, container_addrs, container_slot_counts)`` from the ``DET_CONTAINER_*``
    variables the master sets in every container of a trial.

    Defaults (one container): ``0``, ``["127.0.0.1"]``, ``[len(DET_SLOT_IDS) or 1]``.
    """
    env = dict(os.environ if environ is None else environ)
    slots = _json_env(env, "DET_SLOT_IDS", [])
    n_slots = len(slots) if isinstance(slots, list) else 0
    rank = _int_env(env, "DET_CONTAINER_RANK", 0)
    addrs = _json_env(env, "DET_CONTAINER_ADDRS", ["127.0.0.1"])
    counts = _json_env(env, "DET_CONTAINER_SLOT_COUNTS", [n_slots or 1])
    if not isinstance(addrs, list) or not all(isinstance(a, str) and a for a in addrs):
        raise ValueError(f"DET_CONTAINER_ADDRS={env.get('DET_CONTAINER_ADDRS')!r} must be a JSON "
                         "list of host addresses")
    if not isinstance(counts, list):
        raise ValueError(f"DET_CONTAINER_SLOT_COUNTS={env.get('DET_CONTAINER_SLOT_COUNTS')!r} "
                         "must be a JSON list of integers")
    check_topology(rank, addrs, counts)
    return rank, addrs, counts


def _master_url(env: dict[str, str]) -> str:
    url = env.get("DET_MASTER", "")
    if "://" not in url:
        scheme = "https" if env.get("DET_USE_TLS", "false").lower() == "true" else "http"
        url = f"{scheme}://{url}"
    return url.rstrip("/")


def get_cluster_info(environ: dict[str, str] | None = None) -> ClusterInfo | None:
    """Read the task's :class:`ClusterInfo` from the environment; ``None`` when off-cluster."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("DET_MASTER") or not env.get("DET_TASK_ID"):
        return None
    trial = None
    if env.get("DET_TRIAL_ID"):
        trial = TrialInfo(
            trial_id=_int_env(env, "DET_TRIAL_ID"),
            experiment_id=_int_env(env, "DET_EXPERIMENT_ID"),
            trial_seed=_int_env(env, "DET_TRIAL_SEED"),
            hparams=_json_env(env, "DET_HPARAMS", {}),
            config=_json_env(env, "DET_EXPERIMENT_CONFIG", {}),
            steps_completed=_int_env(env, "DET_STEPS_COMPLETED"),
            run_id=_int_env(env, "DET_TRIAL_RUN_ID", 1),
        )
    slots = _json_env(env, "DET_SLOT_IDS", [])
    container_rank, container_addrs, container_slot_counts = read_topology(env)
    return ClusterInfo(
        master_url=_master_url(env),
        cluster_id=env.get("DET_CLUSTER_ID", ""),
        agent_id=env.get("DET_AGENT_ID", ""),
        task_id=env["DET_TASK_ID"],
        allocation_id=env.get("DET_ALLOCATION_ID", ""),
        session_token=env.get("DET_SESSION_TOKEN", ""),
        task_type=env.get("DET_TASK_TYPE", "TRIAL" if trial else ""),
        slot_ids=[int(s) for s in slots] if isinstance(slots, list) else [],
        latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
        trial=trial,
        container_rank=container_rank,
        container_addrs=container_addrs,
        container_slot_counts=container_slot_counts,
    )
