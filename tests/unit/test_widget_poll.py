"""The widgets' Poller: applies only changes, stops when done, on stop() or after errors."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from det_jupyter.client import MasterUnreachable
from det_jupyter.widgets._poll import Poller, fingerprint


class ScriptedFetch:
    """Returns the scripted values in turn (an exception instance is raised), then the last."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        value = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        if isinstance(value, Exception):
            raise value
        return value


def test_apply_runs_only_when_the_data_changed() -> None:
    applied: list[Any] = []
    p = Poller(ScriptedFetch({"s": 1}, {"s": 1}, {"s": 2}, {"s": 2}), applied.append)
    for _ in range(4):
        assert p.poll_once()
    assert applied == [{"s": 1}, {"s": 2}] and p.updates == 2


def test_done_stops_after_the_last_update() -> None:
    applied: list[Any] = []
    p = Poller(ScriptedFetch("RUNNING", "COMPLETED"), applied.append,
               done=lambda s: s == "COMPLETED")
    assert p.poll_once() and not p.poll_once()
    assert applied == ["RUNNING", "COMPLETED"]


def test_errors_are_reported_cleared_and_give_up_after_max_errors() -> None:
    seen: list[str | None] = []
    down = MasterUnreachable("cannot reach the master")
    p = Poller(ScriptedFetch(down, 1, down, down, down), lambda _d: None,
               on_error=seen.append, max_errors=3)
    assert p.poll_once() and p.poll_once() and p.poll_once() and p.poll_once()
    assert not p.poll_once()
    assert seen == ["cannot reach the master", None, "cannot reach the master",
                    "cannot reach the master",
                    "cannot reach the master — live updates stopped after 3 failures"]


def test_background_thread_polls_and_stop_ends_it() -> None:
    fetch = ScriptedFetch(1, 2, 3)
    got = threading.Event()
    p = Poller(fetch, lambda d: d == 3 and got.set(), interval=0.01).start()
    assert got.wait(5)
    p.stop()
    deadline = time.time() + 5
    while p.running and time.time() < deadline:
        time.sleep(0.01)
    assert not p.running
    calls = fetch.calls
    time.sleep(0.05)
    assert fetch.calls == calls  # nothing after stop()


def test_a_bug_in_apply_stops_the_thread_with_a_message() -> None:
    seen: list[str | None] = []
    stopped = threading.Event()

    def boom(_data: Any) -> None:
        raise KeyError("state")

    p = Poller(ScriptedFetch(1), boom, interval=0.01,
               on_error=lambda m: (seen.append(m), stopped.set()))
    p.start()
    assert stopped.wait(5)
    assert seen == ["live updates stopped: KeyError: 'state'"]


def test_interval_must_be_positive_and_fingerprint_is_stable() -> None:
    with pytest.raises(ValueError, match="interval must be > 0 seconds, got 0"):
        Poller(lambda: 1, lambda _d: None, interval=0)
    assert fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})


def test_the_thread_gives_up_after_max_runtime() -> None:
    seen: list[str | None] = []
    stopped = threading.Event()
    p = Poller(ScriptedFetch(1), lambda _d: None, interval=0.01, max_runtime=0.05,
               on_error=lambda m: (seen.append(m), stopped.set()))
    p.start()
    assert stopped.wait(5)
    assert seen == ["live updates stopped after 0 min; run the cell again to follow it"]
