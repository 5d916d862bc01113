"""``POST /api/v1/allocations/{id}/all_gather`` and ``.../proxy_address`` through a real master,
with a running trial's own allocation token (the counter fixture hands it to the test)."""

from __future__ import annotations

import concurrent.futures as cf
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import ApiError, Client, MasterProcess, wait_experiment, wait_for
from tests.integration._exp import submit_counter, trials


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("all-gather")).start()
    yield m
    m.stop()


def _running_trial(master: MasterProcess, shared: Path, name: str) -> tuple[int, str, Client]:
    """A long counter trial: its experiment, its allocation id and a client with its token."""
    client = master.admin()
    token_file = shared / name
    exp_id = submit_counter(client, length=2000, sleep=0.05, token_file=str(token_file))
    wait_for(lambda: token_file.exists() and token_file.read_text(), what="token")
    task_id = trials(client, exp_id)[0]["taskId"]
    alloc_id = client.get(f"/api/v1/tasks/{task_id}")["task"]["allocations"][-1]["allocationId"]
    task = Client(master.url, headers={"Grpc-Metadata-x-allocation-token": f"Bearer {token_file.read_text()}"})
    return exp_id, alloc_id, task


def _gather(task: Client, alloc_id: str, num_peers: int, data: Any, request_uuid: str | None = None) -> Any:
    body = {"allocationId": alloc_id, "requestUuid": request_uuid or str(uuid.uuid4()),
            "numPeers": num_peers, "data": data}
    return task.post(f"/api/v1/allocations/{alloc_id}/all_gather", body, timeout=60)["data"]


def test_all_gather_answers_every_peer_with_all_the_data(master: MasterProcess, task_shared_dir: Path) -> None:
    exp_id, alloc_id, task = _running_trial(master, task_shared_dir, "token-gather")
    try:
        # One participant: answered at once with its own data.
        assert _gather(task, alloc_id, 1, {"solo": 1}) == [{"solo": 1}]
        # Three peers: none is answered before the last comes; all get everything, in arrival order.
        with cf.ThreadPoolExecutor(3) as pool:
            first = pool.submit(_gather, task, alloc_id, 3, {"rank": "a"})
            time.sleep(0.5)
            second = pool.submit(_gather, task, alloc_id, 3, {"rank": "b"})
            time.sleep(0.5)
            assert not first.done() and not second.done()
            third = pool.submit(_gather, task, alloc_id, 3, {"rank": "c"})
            got = [f.result(timeout=30) for f in (first, second, third)]
        assert got == [[{"rank": "a"}, {"rank": "b"}, {"rank": "c"}]] * 3
        # The next round starts afresh.
        with cf.ThreadPoolExecutor(2) as pool:
            again = [pool.submit(_gather, task, alloc_id, 2, i) for i in (1, 2)]
            # Both get both data, in the order they arrived (which two threads do not fix).
            a, b = (f.result(timeout=30) for f in again)
            assert a == b and sorted(a) == [1, 2], (a, b)
        with pytest.raises(ApiError) as err:
            _gather(task, alloc_id, 0, {})
        assert err.value.status == 400 and "numPeers" in str(err.value.body)
        # A waiter whose allocation ends gets a clear error instead of hanging.
        with cf.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(_gather, task, alloc_id, 2, {"never": "answered"})
            time.sleep(0.5)
            master.admin().post(f"/api/v1/experiments/{exp_id}/kill")
            with pytest.raises(ApiError) as err:
                waiting.result(timeout=60)
        assert err.value.status == 409 and "the allocation has ended" in str(err.value.body)
    finally:
        master.admin().post(f"/api/v1/experiments/{exp_id}/kill")
        wait_experiment(master.admin(), exp_id, {"STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"})


def test_only_the_task_itself_reports_its_proxy_address(master: MasterProcess, task_shared_dir: Path) -> None:
    exp_id, alloc_id, task = _running_trial(master, task_shared_dir, "token-proxy")
    path = f"/api/v1/allocations/{alloc_id}/proxy_address"
    try:
        # A trial has no proxied server: its report (0.38.1's prep_container --proxy) is taken.
        assert task.post(path, {"allocationId": alloc_id, "proxyAddress": "10.1.2.3"}) == {}
        with pytest.raises(ApiError) as err:  # a user, even the admin, does not say where a task is
            master.admin().post(path, {"allocationId": alloc_id, "proxyAddress": "10.1.2.3"})
        assert err.value.status == 403
    finally:
        master.admin().post(f"/api/v1/experiments/{exp_id}/kill")
        wait_experiment(master.admin(), exp_id, {"STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"})
