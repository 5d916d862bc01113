"""Determined's 7-step priority example (seeds/003, "priority scheduler behavior with preemption
enabled") on a real master with 8 slots, real trials and a long-running command standing in for
the notebook (neither is preemptible)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import Client, MasterProcess, create_experiment, wait_experiment, wait_for
from tests.integration._exp import COUNTER, trial_log_text, trials

pytestmark = pytest.mark.slow

CONFIG = {"resource_manager": {"scheduler": {"type": "priority", "preemption": True}}}


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MasterProcess]:
    cfg = tmp_path / "master.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    m = MasterProcess(tmp_path / "master", slots=8, extra_args=["--config", str(cfg)]).start()
    yield m
    m.stop()


def _experiment(client: Client, name: str, *, priority: int, slots: int, trials_n: int = 1,
                length: int, sleep: float = 0.05) -> int:
    searcher = ({"name": "random", "metric": "validation_loss", "max_trials": trials_n,
                 "max_concurrent_trials": trials_n, "max_length": {"batches": length}}
                if trials_n > 1 else
                {"name": "single", "metric": "validation_loss", "max_length": {"batches": length}})
    config = {
        "name": name, "entrypoint": "python3 train.py",
        "hyperparameters": {"length": length, "sleep": sleep, "ckpt_every": 5,
                            "x": {"type": "double", "minval": 0.5, "maxval": 2.0} if trials_n > 1 else 1.0},
        "searcher": searcher, "resources": {"priority": priority, "slots_per_trial": slots},
        "max_restarts": 0,
    }
    return create_experiment(client, yaml.safe_dump(config), COUNTER)["experiment"]["id"]


def _slots_by_task(client: Client) -> Counter[str]:
    """Slots held per task prefix: experiment id ("12") or command task id."""
    held: Counter[str] = Counter()
    for summary in client.get("/api/v1/tasks")["allocationIdToSummary"].values():
        owner = summary["taskId"].split(".", 1)[0]
        held[owner] += summary["slotsNeeded"]
    return held


def _job(client: Client, exp_id: int) -> dict:
    exp = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    jobs = [j["full"] for j in client.get("/api/v1/job-queues-v2")["jobs"]]
    return next(j for j in jobs if j["jobId"] == exp["jobId"])


def _command_state(client: Client, task_id: str) -> str:
    return client.get(f"/api/v1/commands/{task_id}")["command"]["state"]


def test_the_seven_steps(master: MasterProcess) -> None:
    client = master.admin()

    # 1. A priority-2 search: 8 one-slot trials take all 8 slots.
    asha = _experiment(client, "search", priority=2, slots=1, trials_n=8, length=240)
    wait_for(lambda: _slots_by_task(client)[str(asha)] == 8, what="the search on all 8 slots")

    # 2. A priority-1 four-slot experiment: 4 search trials are preempted (they checkpoint and
    #    ack) and it runs.
    dist1 = _experiment(client, "dist-p1", priority=1, slots=4, length=40)
    wait_for(lambda: _slots_by_task(client)[str(dist1)] == 4, what="the p1 experiment placed")
    assert _slots_by_task(client)[str(asha)] == 4
    logs = [trial_log_text(client, tr["id"]) for tr in trials(client, asha)]
    assert sum("preempted at step" in text for text in logs) == 4

    # 3. A priority-3 one-slot command (the notebook): it waits while the experiments need
    #    all the slots, then runs once they need 7 or fewer.
    cmd = client.post("/api/v1/commands", {"config": {
        "entrypoint": ["sleep", "600"], "resources": {"slots": 1, "priority": 3}}})["command"]["id"]
    assert _command_state(client, cmd) == "STATE_QUEUED"
    queued = [j["full"] for j in client.get("/api/v1/job-queues-v2")["jobs"]
              if j["full"]["type"] == "TYPE_COMMAND"]
    assert [(j["entityId"], j["summary"]["state"], j["isPreemptible"]) for j in queued] == [
        (cmd, "STATE_QUEUED", False)]
    assert queued[0]["waitReason"]

    # 4. Both experiments complete (preempted trials resumed from their checkpoints); the
    #    command runs.
    assert wait_experiment(client, dist1, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
    assert wait_experiment(client, asha, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240) == "STATE_COMPLETED"
    resumed = [t for t in (trial_log_text(client, tr["id"]) for tr in trials(client, asha))
               if "preempted at step" in t]
    assert len(resumed) == 4 and all("run 2 starting at step" in t and "starting at step 0\n" not in t.split("run 2")[1]
                                     for t in resumed)
    wait_for(lambda: _command_state(client, cmd) == "STATE_RUNNING", what="the command running")

    # 5. A priority-1 eight-slot experiment cannot start: the command is not preemptible.
    big = _experiment(client, "dist-p1-8", priority=1, slots=8, length=20)
    wait_for(lambda: _job(client, big)["summary"]["state"] == "STATE_QUEUED", what="the 8-slot job queued")
    assert "waitReason" in _job(client, big)

    # 6. A priority-2 four-slot experiment uses four of the seven idle slots.
    dist2 = _experiment(client, "dist-p2", priority=2, slots=4, length=400)
    wait_for(lambda: _slots_by_task(client)[str(dist2)] == 4, what="the p2 experiment placed")
    assert _job(client, big)["summary"]["state"] == "STATE_QUEUED"

    # 7. Kill the command: the p2 experiment is preempted and the p1 eight-slot one runs; once
    #    it is done the p2 one resumes from its checkpoint and completes.
    client.post(f"/api/v1/commands/{cmd}/kill")
    wait_for(lambda: _slots_by_task(client)[str(big)] == 8, timeout=60, what="the 8-slot experiment placed")
    assert _slots_by_task(client)[str(dist2)] == 0
    assert wait_experiment(client, big, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
    assert wait_experiment(client, dist2, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
    text = trial_log_text(client, trials(client, dist2)[0]["id"])
    assert "preempted at step" in text and "run 2 starting at step" in text
    assert client.get(f"/api/v1/commands/{cmd}")["command"]["state"] == "STATE_TERMINATED"
