"""Issue 27, lifecycle: killing a trial tells the searcher the trial was canceled and closed,
as Determined 0.38.1's master does. An experiment of one trial then ends CANCELED (it stayed
ACTIVE forever), a search of several goes on with the others and completes, and an
experiment that ended early does not report 100% progress."""

from __future__ import annotations

from tests._master import MasterProcess, wait_for
from tests.integration._exp import submit_counter, trials

TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR")


def _running_trial(client, exp_id: int, index: int = 0) -> dict:
    return wait_for(lambda: next((t for i, t in enumerate(trials(client, exp_id))
                               if i == index and t["state"] == "STATE_RUNNING"), None))


def _experiment(client, exp_id: int) -> dict:
    return client.get(f"/api/v1/experiments/{exp_id}")["experiment"]


def test_killing_the_only_trial_cancels_the_experiment(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, length=5000, sleep=0.05)
    trial = _running_trial(client, exp_id)
    client.post(f"/api/v1/trials/{trial['id']}/kill")
    exp = wait_for(lambda: (e := _experiment(client, exp_id))["state"] in TERMINAL and e)
    assert exp["state"] == "STATE_CANCELED", exp
    assert exp["progress"] < 1.0, exp
    assert trials(client, exp_id)[0]["state"] == "STATE_CANCELED"
    # the job is gone from the queue once the experiment is over
    assert all(j.get("entityId") != str(exp_id) for j in client.get("/api/v1/job-queues-v2")["jobs"])


def test_killing_one_trial_of_a_search_lets_the_others_finish(master: MasterProcess) -> None:
    client = master.admin()
    exp_id = submit_counter(client, length=60, sleep=0.05, searcher={
        "name": "random", "metric": "validation_loss", "max_trials": 2, "max_concurrent_trials": 2,
        "max_length": {"batches": 60}})
    first = _running_trial(client, exp_id, 0)
    client.post(f"/api/v1/trials/{first['id']}/kill")
    exp = wait_for(lambda: (e := _experiment(client, exp_id))["state"] in TERMINAL and e, timeout=90)
    assert exp["state"] == "STATE_COMPLETED", exp
    states = sorted(t["state"] for t in trials(client, exp_id))
    assert states == ["STATE_CANCELED", "STATE_COMPLETED"], states
