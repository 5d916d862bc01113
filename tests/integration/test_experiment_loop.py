"""The experiment loop end to end: real master, real agent processes, our harness."""

from __future__ import annotations

import pytest

from tests._master import MasterProcess, wait_experiment, wait_for
from tests.integration._exp import submit_counter, training_steps, trial_log_text, trials

pytestmark = pytest.mark.slow

ASHA = {
    "name": "adaptive_asha", "metric": "validation_loss", "time_metric": "batches", "max_time": 20,
    "max_trials": 8, "divisor": 2, "mode": "aggressive", "max_concurrent_trials": 2,
}


def test_asha_search_completes_and_stops_losers(any_master: MasterProcess) -> None:
    client = any_master.admin()
    # 50 ms steps: a stop decided at a rung has 250 ms (to the next checkpoint's preemption
    # check) to reach the trial; at 20 ms a loaded CI machine sometimes let every trial finish.
    exp_id = submit_counter(client, searcher=ASHA, sleep=0.05,
                            x={"type": "double", "minval": 0.5, "maxval": 2.0})
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
    ts = trials(client, exp_id)
    assert len(ts) == 8
    assert all(t["state"] == "STATE_COMPLETED" for t in ts)
    lengths = sorted(t["totalBatchesProcessed"] for t in ts)
    assert lengths[0] < 20, "ASHA stopped no trial early"
    assert lengths[-1] == 20
    exp = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    best = min(t["searcherMetricValue"] for t in ts)
    assert exp["bestTrialSearcherMetric"] == pytest.approx(best)
    stopped = [t for t in ts if t["totalBatchesProcessed"] < 20]
    assert "preempted at step" in trial_log_text(client, stopped[0]["id"])
    # A trial page's chart: whole histories of one metric, read with the trials (one round trip
    # on PostgreSQL), as the general route answers them, every training step in order.
    ids = "&".join(f"trialIds={t['id']}" for t in ts[:3])
    chart = f"/api/v1/trials/time-series?{ids}&metricNames=loss&group=training"
    whole = client.get(chart)["trials"]
    assert whole == client.get(chart + "&maxDatapoints=100000")["trials"]
    assert sorted(c["trial"]["id"] for c in whole) == sorted(t["id"] for t in ts[:3])
    for c in whole:
        points = c["metrics"][0]["data"]
        assert [p["batches"] for p in points] == training_steps(client, c["trial"]["id"])
        assert all(p["values"]["loss"] == pytest.approx(1.0 / p["batches"]) for p in points)


def test_crash_restarts_from_latest_checkpoint(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, crash_at=8, crash_runs="1")
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    (trial,) = trials(client, exp_id)
    assert trial["restarts"] == 1
    assert training_steps(client, trial["id"]) == list(range(1, 21))
    log = trial_log_text(client, trial["id"])
    assert "crashing at step 8" in log
    assert "run 2 starting at step 5" in log


def test_restart_budget_exhausted_errors(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, crash_at=3, crash_runs="all", max_restarts=2)
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_ERROR"
    (trial,) = trials(client, exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 3
    assert trial_log_text(client, trial["id"]).count("crashing at step 3") == 3


def test_pause_checkpoints_and_resumes_at_the_step(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, length=60, sleep=0.05, ckpt_every=5)
    (trial,) = wait_for(lambda: trials(client, exp_id), what="trial")
    wait_for(lambda: len(training_steps(client, trial["id"])) >= 12, what="progress")
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    wait_experiment(client, exp_id, {"STATE_PAUSED"})
    assert trials(client, exp_id)[0]["state"] == "STATE_PAUSED"
    wait_for(lambda: "preempted at step" in trial_log_text(client, trial["id"]), what="the trial to ack")
    wait_for(lambda: not client.get("/api/v1/agents")["agents"][0]["numContainers"], what="slots freed")
    paused_at = training_steps(client, trial["id"])[-1]
    assert paused_at % 5 == 0, "the trial should stop right after a checkpoint"
    assert f"preempted at step {paused_at}" in trial_log_text(client, trial["id"])
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    assert training_steps(client, trial["id"]) == list(range(1, 61))
    final = trials(client, exp_id)[0]
    assert final["restarts"] == 0
    assert f"run 2 starting at step {paused_at}" in trial_log_text(client, trial["id"])


def test_kill_cancels_running_experiment(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, length=1000, sleep=0.05)
    wait_for(lambda: any(t["state"] == "STATE_RUNNING" for t in trials(client, exp_id)), what="running")
    client.post(f"/api/v1/experiments/{exp_id}/kill")
    assert wait_experiment(client, exp_id, {"STATE_CANCELED"}, timeout=30) == "STATE_CANCELED"
    assert trials(client, exp_id)[0]["state"] == "STATE_CANCELED"
