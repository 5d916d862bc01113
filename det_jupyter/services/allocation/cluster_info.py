"""Build the ``/run/determined/info/*.json`` files the stock ``determined`` harness reads.

Inside a task, ``determined.get_cluster_info()`` calls ``ClusterInfo._from_file()``, which reads
``cluster.json`` and passes its keys straight to ``ClusterInfo(**json)``, then does the same for
``trial.json`` (``TrialInfo(**json)``), ``resources.json`` (``ResourcesInfo(**json)``) and
``rendezvous.json`` (``RendezvousInfo(**json)``) in the same directory
(``determined/_info.py``; Determined's own ``exec/prep_container.py`` writes them with
``_to_file``, which dumps each object's attributes with the leading underscore stripped).

Because the constructors take ``**json``, every key must be one of the constructor's argument
names — an unknown key is a ``TypeError`` in the task — and every argument without a default
must be present. So the key sets below are exactly the constructors' signatures; do not add
fields here. Pure functions, standard library only: the master puts the result into the
TaskSpec's ``info_files`` and the agent writes it out.
"""

from __future__ import annotations

import json
from typing import Any

#: Where the stock harness reads the files (``determined/_info.py``).
INFO_DIR = "/run/determined/info"

#: The keys of ``trial.json``: exactly ``TrialInfo.__init__``'s arguments.
TRIAL_KEYS = (
    "trial_id",
    "experiment_id",
    "trial_seed",
    "hparams",
    "config",
    "steps_completed",
    "trial_run_id",
    "debug",
    "inter_node_network_interface",
)

#: Task types ``ClusterInfo.task_type`` documents (the master's ``DET_TASK_TYPE``).
TASK_TYPES = frozenset(
    {"TRIAL", "NOTEBOOK", "SHELL", "COMMAND", "TENSORBOARD", "CHECKPOINT_GC", "GENERIC"}
)


def build_info_files(
    *,
    master_url: str,
    cluster_id: str,
    agent_id: str,
    slot_ids: list[int],
    task_id: str,
    allocation_id: str,
    session_token: str,
    task_type: str,
    latest_checkpoint: str | None,
    trial: dict[str, Any] | None,
    container_addrs: list[str],
    container_rank: int,
    container_slot_counts: list[int],
    gpu_uuids: list[str],
) -> dict[str, dict[str, Any]]:
    """Return ``{file name: JSON object}`` for the task's info directory.

    ``trial.json`` is included only when ``trial`` is given (it must be for ``TRIAL`` tasks:
    the harness asserts it exists when code reads ``info.trial``). ``trial`` holds exactly
    ``TRIAL_KEYS``; ``config`` is the expanded experiment config, whose ``checkpoint_storage``
    the harness builds its storage manager from. Raises ValueError naming what is wrong.
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type {task_type!r} is not one of {sorted(TASK_TYPES)}")
    if task_type == "TRIAL" and trial is None:
        raise ValueError("a TRIAL task needs trial info (trial=...); the harness asserts on it")
    if not (len(container_addrs) == len(container_slot_counts) and container_addrs):
        raise ValueError(
            "container_addrs and container_slot_counts must be non-empty and the same length "
            f"(got {len(container_addrs)} and {len(container_slot_counts)})"
        )
    if not 0 <= container_rank < len(container_addrs):
        raise ValueError(
            f"container_rank {container_rank} is outside 0..{len(container_addrs) - 1}"
        )
    files: dict[str, dict[str, Any]] = {
        "cluster.json": {
            "master_url": master_url,
            "cluster_id": cluster_id,
            "agent_id": agent_id,
            "slot_ids": [int(s) for s in slot_ids],
            "task_id": task_id,
            "allocation_id": allocation_id,
            "session_token": session_token,
            "task_type": task_type,
            # No TLS between task and master: both stay None so the harness skips cert loading.
            "master_cert_name": None,
            "master_cert_file": None,
            "latest_checkpoint": latest_checkpoint,
        },
        "resources.json": {"gpu_uuids": list(gpu_uuids)},
        "rendezvous.json": {
            "container_addrs": list(container_addrs),
            "container_rank": int(container_rank),
            "container_slot_counts": [int(c) for c in container_slot_counts],
        },
    }
    if trial is not None:
        files["trial.json"] = build_trial_info(trial)
    # Fail here, in the master, rather than in the task: everything must be plain JSON.
    json.dumps(files)
    return files


def build_trial_info(trial: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise ``trial.json`` (keys exactly ``TRIAL_KEYS``)."""
    missing = [k for k in TRIAL_KEYS if k not in trial]
    extra = sorted(set(trial) - set(TRIAL_KEYS))
    if missing or extra:
        raise ValueError(
            f"trial info must have exactly the keys {list(TRIAL_KEYS)}: "
            f"missing {missing}, unexpected {extra} (TrialInfo(**json) rejects both)"
        )
    config = trial["config"]
    if not isinstance(config, dict) or not isinstance(config.get("checkpoint_storage"), dict):
        raise ValueError(
            "trial config must be the expanded experiment config with a checkpoint_storage "
            "object; core.init() builds the storage manager from it"
        )
    if not isinstance(trial["hparams"], dict):
        raise ValueError(f"hparams must be an object, got {type(trial['hparams']).__name__}")
    return {
        "trial_id": int(trial["trial_id"]),
        "experiment_id": int(trial["experiment_id"]),
        "trial_seed": int(trial["trial_seed"]),
        "hparams": trial["hparams"],
        "config": config,
        "steps_completed": int(trial["steps_completed"]),
        "trial_run_id": int(trial["trial_run_id"]),
        "debug": bool(trial["debug"]),
        "inter_node_network_interface": trial["inter_node_network_interface"],
    }
