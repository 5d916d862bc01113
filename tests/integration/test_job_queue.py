"""The job queue (GET /api/v1/job-queues-v2) on a real master whose 2 slots cannot run it all."""

from __future__ import annotations

import pytest
import yaml

from tests._master import ApiError, Client, MasterProcess, create_experiment, wait_for
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.slow

QUEUE = "/api/v1/job-queues-v2"


def _submit(client: Client, name: str, *, slots: int = 1, priority: int | None = None) -> str:
    """A long counter experiment; its job id."""
    cfg = yaml.safe_load(counter_config(length=1000, sleep=0.05))
    cfg["name"] = name
    cfg["resources"] = {"slots_per_trial": slots, **({"priority": priority} if priority else {})}
    exp = create_experiment(client, yaml.safe_dump(cfg), COUNTER)["experiment"]
    return exp["jobId"]


def _jobs(client: Client, query: str = "") -> list[dict]:
    return [j["full"] for j in client.get(QUEUE + query)["jobs"]]


def _placed(client: Client, n: int) -> bool:
    return sum(j["allocatedSlots"] for j in _jobs(client)) == n


def test_queue_order_states_and_wait_reasons(any_master: MasterProcess) -> None:
    client = any_master.admin()
    first = _submit(client, "first")
    second = _submit(client, "second")
    wait_for(lambda: _placed(client, 2), what="both slots placed")
    behind = _submit(client, "behind")
    huge = _submit(client, "huge", slots=4)
    urgent = _submit(client, "urgent", priority=10)
    wait_for(lambda: len(_jobs(client)) == 5, what="five jobs in the queue")

    jobs = _jobs(client)
    assert [j["jobId"] for j in jobs] == [urgent, first, second, behind, huge]
    assert [j["summary"]["jobsAhead"] for j in jobs] == [0, 1, 2, 3, 4]
    by_name = {j["name"]: j for j in jobs}
    assert {n: j["summary"]["state"] for n, j in by_name.items()} == {
        "urgent": "STATE_QUEUED", "first": "STATE_SCHEDULED", "second": "STATE_SCHEDULED",
        "behind": "STATE_QUEUED", "huge": "STATE_QUEUED",
    }
    assert by_name["first"]["allocatedSlots"] == by_name["first"]["requestedSlots"] == 1
    assert (by_name["huge"]["allocatedSlots"], by_name["huge"]["requestedSlots"]) == (0, 4)
    assert by_name["urgent"]["priority"] == 10 and by_name["behind"]["priority"] == 42
    assert all(j["type"] == "TYPE_EXPERIMENT" and j["resourcePool"] == "default" for j in jobs)
    assert all(j["username"] == "admin" and j["isPreemptible"] for j in jobs)

    assert "waitReason" not in by_name["first"]
    assert by_name["urgent"]["waitReason"] == "waiting for 1 free slots; 0 are free in pool default"
    assert by_name["behind"]["waitReason"] == f"behind job {urgent} (priority 10)"
    # Larger than the only agent, and than the whole pool: it never runs (and blocks no one).
    assert by_name["huge"]["waitReason"].startswith("needs 4 slots")
    assert by_name["huge"]["waitReason"] == "needs 4 slots but the largest pool (default) has 2"


def test_queue_filters_order_and_pages(master: MasterProcess) -> None:
    client = master.admin()
    running = _submit(client, "running")
    wait_for(lambda: _placed(client, 1), what="one slot placed")
    big = _submit(client, "big", slots=2)
    wait_for(lambda: len(_jobs(client)) == 2, what="two jobs in the queue")

    queued = _jobs(client, "?states=STATE_QUEUED")
    assert [(j["jobId"], j["summary"]["jobsAhead"]) for j in queued] == [(big, 1)]
    assert "1 are free in pool default" in queued[0]["waitReason"]
    assert [j["jobId"] for j in _jobs(client, "?orderBy=ORDER_BY_DESC")] == [big, running]
    page = client.get(QUEUE + "?offset=1&limit=1")
    assert [j["full"]["jobId"] for j in page["jobs"]] == [big]
    assert page["pagination"] == {"offset": 1, "limit": 1, "startIndex": 1, "endIndex": 2, "total": 2}
    with pytest.raises(ApiError) as err:
        client.get(QUEUE + "?resourcePool=elsewhere")
    assert err.value.status == 400 and "the pools are default" in err.value.body["message"]
    with pytest.raises(ApiError) as err:
        client.get(QUEUE + "?states=RUNNING")
    assert err.value.status == 400
