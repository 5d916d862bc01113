"""The searcher batch: events queued in one loop turn become one feed of one group per
experiment (ExperimentService.searcher_events_many writes them in one transaction)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from det_jupyter.services.experiments.searcher_batch import SearcherBatcher
from det_jupyter.services.experiments.searcher_log import SearcherEvent


def _val(rid: str) -> SearcherEvent:
    return SearcherEvent("validation_completed", rid, metrics={"loss": 1.0})


class RecordingFeed:
    """Records each flush's groups; raises after recording when ``fail`` is set."""

    def __init__(self, fail: bool = False) -> None:
        self.flushes: list[list[tuple[int, list[str | None]]]] = []
        self.fail = fail

    @property
    def groups(self) -> list[tuple[int, list[str | None]]]:
        return [g for flush in self.flushes for g in flush]

    def __call__(self, groups: dict[int, list[SearcherEvent]]) -> None:
        self.flushes.append([(exp_id, [e.request_id for e in events]) for exp_id, events in groups.items()])
        if self.fail:
            raise RuntimeError("experiment 1 failed")


def test_one_loop_turn_is_one_flush_with_one_group_per_experiment() -> None:
    feed = RecordingFeed()
    batch = SearcherBatcher(feed)
    loop_turn: list[Callable[[], None]] = []
    batch.schedule = loop_turn.append
    for exp_id, rids in [(1, ["a"]), (2, ["x"]), (1, ["b", "c"])]:
        batch.add(exp_id, [_val(r) for r in rids])
        batch.kick()
    assert len(loop_turn) == 1 and feed.groups == []
    loop_turn.pop()()
    assert feed.flushes == [[(1, ["a", "b", "c"]), (2, ["x"])]]  # one feed, both groups
    batch.add(1, [_val("d")])
    batch.kick()
    assert len(loop_turn) == 1  # the next turn gets a flush of its own
    loop_turn.pop()()
    assert feed.groups[-1] == (1, ["d"])


def test_without_a_hook_kick_feeds_at_once() -> None:
    feed = RecordingFeed()
    batch = SearcherBatcher(feed)
    batch.add(7, [_val("a")])
    batch.kick()
    assert feed.groups == [(7, ["a"])]


def test_a_failing_feed_is_raised_and_feeds_nothing_twice() -> None:
    feed = RecordingFeed(fail=True)
    batch = SearcherBatcher(feed)
    batch.add(1, [_val("a")])
    batch.add(2, [_val("x")])
    with pytest.raises(RuntimeError, match="experiment 1"):
        batch.flush()
    assert feed.groups == [(1, ["a"]), (2, ["x"])]
    batch.flush()
    assert len(feed.flushes) == 1  # the queue was consumed: nothing is fed twice
