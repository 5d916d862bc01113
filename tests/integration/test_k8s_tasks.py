"""Issue 31: more of what runs on the Kubernetes resource manager, against the real test bed
(tests/_k8s.py), with ``max_slots_per_pod: 1`` (so a two-slot trial is two pods) and the
priority scheduler with preemption:

- a two-pod gang trains with torch.distributed's gloo, both ranks in step, one checkpoint;
- a notebook in a pod is reached through the master's proxy (a kernel cell over its websocket);
- a high-priority trial preempts a low one, which checkpoints first and resumes later from it;
- an adaptive ASHA search runs its trials in pods to the end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import _k8s
from tests._k8s import Cluster
from tests._master import MasterProcess, create_experiment, wait_experiment, wait_for
from tests.integration import _notebooks as nbh
from tests.integration._exp import COUNTER, task_log_text, trial_log_text, trials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DDP = Path(__file__).parent / "fixtures" / "ddp"
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.fixture(scope="module")
def master(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """4 slots of half a CPU, one per pod; priority scheduling with preemption."""
    work = tmp_path_factory.mktemp("k8s-tasks")
    with _k8s.namespace(k8s_cluster) as ns, _k8s.k8s_master(
            k8s_cluster, work, ns, slot_resource_requests={"cpu": 0.5}, max_slots_per_pod=1,
            scheduler={"type": "priority", "preemption": True}) as m:
        yield m


def test_the_node_is_one_agent_per_pod_sized_share(master: MasterProcess, k8s_cluster: Cluster) -> None:
    admin = master.admin()

    def shares() -> int:  # 4 on a quiet 2-CPU node; fewer while other tests' pods hold CPU
        return int(_k8s.free_cpus(k8s_cluster) / 0.5 + 1e-9)

    agents = wait_for(lambda: len(a := admin.get("/api/v1/agents")["agents"]) == shares() and a,
                      timeout=30, what="one one-slot agent per free half CPU")
    assert sorted(a["id"] for a in agents) == [f"{k8s_cluster.node}/{i}" for i in range(len(agents))]
    assert all(len(a["slots"]) == 1 for a in agents)


def test_a_two_pod_gang_trains_with_gloo(master: MasterProcess) -> None:
    client = master.admin()
    config = {
        "name": "dist", "entrypoint": "python3 -m det_harness.launch.torch_distributed python3 train.py",
        "hyperparameters": {"length": 20},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 20}},
        "resources": {"slots_per_trial": 2}, "max_restarts": 0,
    }
    exp_id = create_experiment(client, yaml.safe_dump(config), DDP)["experiment"]["id"]
    state = wait_experiment(client, exp_id, TERMINAL, timeout=300)
    (trial,) = trials(client, exp_id)
    text = trial_log_text(client, trial["id"])
    assert state == "STATE_COMPLETED", text[-3000:]
    by_rank = {(e["result"].get("rankId"), e["result"]["message"].strip())
               for e in client.get(f"/api/v1/trials/{trial['id']}/logs")}
    assert {(0, "worker 0 done"), (1, "worker 1 done")} <= by_rank, text[-3000:]
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    latest = max(ckpts, key=lambda c: c["metadata"]["steps_completed"])
    assert {"rank-0.json", "rank-1.json"} <= set(latest["resources"]), (latest, text[-4000:])
    root = master.data_dir / "checkpoints" / latest["uuid"]
    weights = [json.loads((root / f"rank-{r}.json").read_text())["weight"] for r in (0, 1)]
    assert weights[0] == weights[1]  # the replicas stayed in step


def test_a_notebook_in_a_pod_is_reached_through_the_proxy(master: MasterProcess) -> None:
    client = master.admin()
    nb_id = nbh.launch(client)
    try:
        nbh.wait_running(client, nb_id, timeout=120)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{nbh.state(client, nb_id)}: {task_log_text(client, nb_id)[-4000:]}") from None
    proxy = nbh.proxy_client(client, nb_id)
    kernel = nbh.start_kernel(client, nb_id)
    out = asyncio.run(nbh.run_cell(nbh.ws_url(proxy.url, nb_id, kernel),
                                   {"Authorization": f"Bearer {client.token}"},
                                   "import os; print(os.environ['DET_TASK_TYPE'], os.getuid())"))
    kind, uid = out.split()
    assert kind == "NOTEBOOK" and int(uid) != 0, out
    client.post(f"/api/v1/notebooks/{nb_id}/kill", {})
    wait_for(lambda: nbh.state(client, nb_id) == "STATE_TERMINATED", timeout=60, what="the notebook's end")


def _counter(client: object, name: str, *, priority: int, slots: int, length: int, searcher: dict | None = None,
             hparams: dict | None = None) -> int:
    config = {
        "name": name, "entrypoint": "python3 train.py",
        "hyperparameters": {"length": length, "sleep": 0.1, "ckpt_every": 5, "x": 1.0, **(hparams or {})},
        "searcher": searcher or {"name": "single", "metric": "validation_loss", "max_length": {"batches": length}},
        "resources": {"priority": priority, "slots_per_trial": slots}, "max_restarts": 0,
    }
    return int(create_experiment(client, yaml.safe_dump(config), COUNTER)["experiment"]["id"])  # type: ignore[arg-type]


def test_a_preempted_trial_checkpoints_first_and_resumes_from_it(master: MasterProcess) -> None:
    client = master.admin()
    low = _counter(client, "low", priority=50, slots=1, length=200,
                   searcher={"name": "random", "metric": "validation_loss", "max_trials": 4,
                             "max_concurrent_trials": 4, "max_length": {"batches": 200}},
                   hparams={"x": {"type": "double", "minval": 0.5, "maxval": 2.0}})
    wait_for(lambda: len(ts := trials(client, low)) == 4 and all(
        t["state"] == "STATE_RUNNING" and t.get("totalBatchesProcessed", 0) >= 6 for t in ts) or (
        pytest.fail(f"a low trial ended early: {ts}") if any(t["state"] in TERMINAL for t in ts) else False),
        timeout=240, what="four low trials training (the cluster full)")
    high = _counter(client, "high", priority=10, slots=1, length=5)
    assert wait_experiment(client, high, TERMINAL, timeout=240) == "STATE_COMPLETED"
    assert wait_experiment(client, low, TERMINAL, timeout=420) == "STATE_COMPLETED"
    resumed = []
    for t in trials(client, low):
        assert t["restarts"] == 0  # a preemption is not a failure
        runs = [line for line in trial_log_text(client, t["id"]).splitlines() if line.startswith("run ")]
        if len(runs) > 1:
            resumed.append(runs)
    # One was preempted: it checkpointed, and its second run started from there, not step 0.
    assert resumed, "no low trial was preempted"
    assert all(r[0] == "run 1 starting at step 0" and not r[1].endswith(" step 0") for r in resumed), resumed


def test_an_asha_search_runs_its_trials_in_pods(master: MasterProcess) -> None:
    client = master.admin()
    exp = _counter(client, "asha", priority=42, slots=1, length=20,
                   searcher={"name": "adaptive_asha", "metric": "validation_loss", "time_metric": "batches",
                             "max_time": 20, "max_trials": 6, "divisor": 2, "mode": "aggressive",
                             "max_concurrent_trials": 3},
                   hparams={"x": {"type": "double", "minval": 0.5, "maxval": 2.0}})
    assert wait_experiment(client, exp, TERMINAL, timeout=400) == "STATE_COMPLETED"
    ts = trials(client, exp)
    assert len(ts) == 6 and all(t["state"] == "STATE_COMPLETED" for t in ts), ts
    lengths = sorted(t["totalBatchesProcessed"] for t in ts)
    assert lengths[0] < 20 and lengths[-1] == 20, lengths  # losers stopped early at a rung
