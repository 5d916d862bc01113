"""Helpers for experiment-loop integration tests on our own harness."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests._master import Client, create_experiment

COUNTER = Path(__file__).parent / "fixtures" / "counter"


def counter_config(*, searcher: dict | None = None, max_restarts: int = 5, **hparams: object) -> str:
    hp = {"length": 20, "sleep": 0.02, "ckpt_every": 5, "x": 1.0}
    hp.update(hparams)
    cfg = {
        "name": "counter",
        "entrypoint": "python3 train.py",
        "hyperparameters": hp,
        "searcher": searcher or {"name": "single", "metric": "validation_loss", "max_length": {"batches": 20}},
        "max_restarts": max_restarts,
    }
    return yaml.safe_dump(cfg)


def submit_counter(client: Client, **kw: object) -> int:
    return create_experiment(client, counter_config(**kw), COUNTER)["experiment"]["id"]


def trials(client: Client, exp_id: int) -> list[dict]:
    return client.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]


def training_steps(client: Client, trial_id: int) -> list[int]:
    """The visible training steps of a trial, in order (from the workloads API)."""
    wl = client.get(f"/api/v1/trials/{trial_id}/workloads")["workloads"]
    return [w["training"]["totalBatches"] for w in wl if "training" in w]


def trial_log_text(client: Client, trial_id: int) -> str:
    lines = client.get(f"/api/v1/trials/{trial_id}/logs")
    if isinstance(lines, dict):
        lines = [lines]
    return "".join(entry["result"]["message"] for entry in lines if entry)  # none yet: {}


def task_log_text(client: Client, task_id: str) -> str:
    """A task's log so far (a command's, a notebook's, a TensorBoard's)."""
    lines = client.get(f"/api/v1/tasks/{task_id}/logs")
    return "".join(e["result"]["message"] for e in ([lines] if isinstance(lines, dict) else lines) if e)
