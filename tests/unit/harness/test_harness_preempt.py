"""Preemption: long-poll watcher → should_preempt() → exactly one acknowledgement."""

from __future__ import annotations

import time

import det_harness as det
import pytest
from det_harness.core import DistributedContext
from harness_fake_master import FakeMaster


def test_long_poll_then_preempt_then_one_ack(on_cluster: FakeMaster) -> None:
    def preemption(rec):
        # The first (timeout 0) call says no; the long-poll then says yes.
        return 200, {"preempt": rec.query["timeout_seconds"] != ["0"]}

    on_cluster.routes["/api/v1/allocations/1.abc.1/signals/preemption"] = preemption
    with det.core.init() as core:
        deadline = time.monotonic() + 5
        while not core.preempt.should_preempt():
            assert time.monotonic() < deadline, "should_preempt() never became True"
            time.sleep(0.01)
        for _ in range(5):
            assert core.preempt.should_preempt()
        core.preempt.acknowledge_preemption_signal()
    polls = on_cluster.find("GET", "/api/v1/allocations/1.abc.1/signals/preemption")
    assert [p.query["timeout_seconds"] for p in polls] == [["0"], ["60"]]
    acks = on_cluster.find("POST", "/api/v1/allocations/1.abc.1/signals/ack_preemption")
    assert len(acks) == 1 and acks[0].body == {}


def test_no_auto_ack(on_cluster: FakeMaster) -> None:
    on_cluster.routes["/api/v1/allocations/"] = lambda rec: (200, {"preempt": True})
    with det.core.init() as core:
        deadline = time.monotonic() + 5
        while not core.preempt.should_preempt(auto_ack=False):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert on_cluster.find("POST", "/api/v1/allocations/1.abc.1/signals/ack_preemption") == []


def test_non_chief_does_not_watch_or_report(on_cluster: FakeMaster) -> None:
    # A non-chief asks the chief (test_collectives.py covers the real exchange); without a
    # collective port to reach it, it says what to set.
    dist = DistributedContext(rank=1, size=2, local_rank=1, local_size=2)
    with det.core.init(distributed=dist) as core:
        with pytest.raises(ValueError, match="DET_COLLECTIVE_PORT"):
            core.preempt.should_preempt()
        core.train.report_training_metrics(1, {"loss": 1.0})
    assert on_cluster.find("GET", "/api/v1/allocations/") == []
    assert on_cluster.find("POST", "/api/v1/trials/3/metrics") == []
    assert on_cluster.find("POST", "/api/v1/runs/start") == []
