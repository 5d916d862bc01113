"""A two-worker distributed trial across two real agents: one slot each, one gang.

The trial's entrypoint is our launcher (torch.distributed's own launcher underneath); the
workers form one gloo world across the agents, reduce gradients, agree on metrics through the
harness collectives and write one sharded checkpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import MasterProcess, agent_cluster, create_experiment, wait_experiment, wait_for
from tests.integration._exp import trial_log_text, trials

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).parent / "fixtures" / "ddp"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MasterProcess]:
    with agent_cluster(tmp_path, {"node-a": 1, "node-b": 1}) as master:
        yield master


def test_two_workers_on_two_agents_train_and_checkpoint(cluster: MasterProcess) -> None:
    client = cluster.admin()
    config = {
        "name": "dist", "entrypoint": "python3 -m det_harness.launch.torch_distributed python3 train.py",
        "hyperparameters": {"length": 20},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 20}},
        "resources": {"slots_per_trial": 2}, "max_restarts": 0,
    }
    exp = create_experiment(client, yaml.safe_dump(config), FIXTURE)
    assert exp["warnings"] == []  # two agents of one slot hold a gang of two
    exp_id = exp["experiment"]["id"]
    summaries = wait_for(lambda: list(client.get("/api/v1/tasks")["allocationIdToSummary"].values()),
                         what="the gang placed")
    devices = summaries[0]["resources"][0]["agentDevices"]
    assert sorted(devices) == ["node-a", "node-b"]

    state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
    [trial] = trials(client, exp_id)
    text = trial_log_text(client, trial["id"])
    assert state == "STATE_COMPLETED", text[-3000:]
    entries = client.get(f"/api/v1/trials/{trial['id']}/logs")
    by_rank = {(e["result"].get("rankId"), e["result"]["message"].strip()) for e in entries}
    # The launcher's "[rank=N] " prefixes become each line's rank id.
    assert {(0, "worker 0 done"), (1, "worker 1 done")} <= by_rank, sorted(m for m in by_rank if "worker" in str(m))
    assert (0, "worker 0 of 2 on node-a") in by_rank or (0, "worker 0 of 2 on node-b") in by_rank

    # Only the chief reported: one training row per step, the mean loss of both workers.
    wl = client.get(f"/api/v1/trials/{trial['id']}/workloads")["workloads"]
    steps = [w["training"]["totalBatches"] for w in wl if "training" in w]
    assert steps == list(range(1, 21)), steps

    # One checkpoint per save, holding both ranks' files.
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert [c["metadata"]["steps_completed"] for c in ckpts] == [10, 20]
    latest = max(ckpts, key=lambda c: c["metadata"]["steps_completed"])
    assert {"rank-0.json", "rank-1.json"} <= set(latest["resources"]), latest["resources"]
    root = Path(cluster.data_dir) / "checkpoints" / latest["uuid"]
    weights = [json.loads((root / f"rank-{r}.json").read_text())["weight"] for r in (0, 1)]
    assert weights[0] == weights[1]  # the replicas stayed in step
