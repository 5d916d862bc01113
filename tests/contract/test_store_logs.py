"""LogService on each backend: seq de-duplication across reconnects, order, filters, paging."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from det_agent.wire import LogLine
from det_jupyter.services.allocation.logs import LogService
from det_jupyter.services.common.clock import FakeClock

TASK, ALLOC, TRIAL = "trial-task-1", "trial-task-1.1", 7


@pytest.fixture
def logs(engine: sa.Engine, clock: FakeClock) -> LogService:
    return LogService(engine, clock)


def lines(seqs: range, stdtype: str = "stdout") -> list[LogLine]:
    return [LogLine(s, stdtype, f"line {s}\n", "") for s in seqs]


def append(logs: LogService, batch: list[LogLine], *, task_id: str = TASK, allocation_id: str = ALLOC,
           trial_id: int | None = TRIAL) -> int:
    return logs.append_agent_lines(
        task_id=task_id, allocation_id=allocation_id, trial_id=trial_id, agent_id="agent-1", lines=batch
    )


def texts(rows: list[sa.Row]) -> list[str]:
    return [r.log for r in rows]


def test_lines_are_stored_in_order_with_their_fields(logs: LogService, clock: FakeClock) -> None:
    assert append(logs, lines(range(0, 3))) == 3
    assert append(logs, lines(range(3, 4), stdtype="stderr")) == 1
    rows = logs.query(task_id=TASK)
    assert texts(rows) == [f"line {s}\n" for s in range(4)]
    last = rows[-1]
    assert (last.allocation_id, last.trial_id, last.agent_id, last.seq) == (ALLOC, TRIAL, "agent-1", 3)
    assert (last.stdtype, last.level, last.timestamp) == ("stderr", "ERROR", clock.now())
    assert rows[0].level == "INFO"


def test_replayed_batch_adds_nothing(logs: LogService) -> None:
    append(logs, lines(range(0, 5)))
    assert append(logs, lines(range(0, 5))) == 0
    assert append(logs, lines(range(3, 8))) == 3  # partly seen: only the new tail
    assert texts(logs.query(task_id=TASK)) == [f"line {s}\n" for s in range(8)]


def test_replay_after_master_restart_adds_nothing(
    logs: LogService, engine: sa.Engine, clock: FakeClock
) -> None:
    """A new master has no seq cache: it must find the high-water mark in the database."""
    append(logs, lines(range(0, 5)))
    restarted = LogService(engine, clock)
    assert append(restarted, lines(range(0, 6))) == 1
    assert [r.seq for r in restarted.query(task_id=TASK)] == [0, 1, 2, 3, 4, 5]


def test_seq_is_per_allocation(logs: LogService) -> None:
    append(logs, lines(range(0, 3)))
    assert append(logs, lines(range(0, 2)), allocation_id=TASK + ".2") == 2  # the next run restarts at 0
    assert len(logs.query(task_id=TASK)) == 5


def test_query_by_trial_and_by_task(logs: LogService) -> None:
    append(logs, lines(range(0, 2)))
    append(logs, lines(range(0, 3)), task_id="other-task", allocation_id="other-task.1", trial_id=8)
    append(logs, lines(range(0, 1)), task_id="cmd", allocation_id="cmd.1", trial_id=None)
    assert len(logs.query(trial_id=TRIAL)) == 2
    assert len(logs.query(trial_id=8)) == 3
    assert len(logs.query(task_id="other-task")) == 3
    assert len(logs.query(task_id="cmd")) == 1
    assert logs.query(trial_id=TRIAL, task_id="other-task") == []
    assert len(logs.query()) == 6


def test_after_id_pages_through_everything_once(logs: LogService) -> None:
    append(logs, lines(range(0, 10)))
    seen: list[str] = []
    after = 0
    while page := logs.query(task_id=TASK, after_id=after, limit=3):
        seen += texts(page)
        after = page[-1].id
    assert seen == [f"line {s}\n" for s in range(10)]


def test_descending_with_limit_is_the_tail(logs: LogService) -> None:
    append(logs, lines(range(0, 10)))
    tail = logs.query(task_id=TASK, descending=True, limit=3)
    assert texts(tail) == ["line 9\n", "line 8\n", "line 7\n"]


def test_system_and_shipped_lines_share_the_stream(logs: LogService, clock: FakeClock) -> None:
    append(logs, lines(range(0, 1)))
    logs.append_system(task_id=TASK, allocation_id=ALLOC, trial_id=TRIAL, message="restarting", level="WARNING")
    logs.append_shipped(TASK, ALLOC, TRIAL, [{"log": "shipped\n", "level": "LOG_LEVEL_DEBUG", "rankId": 1}])
    rows = logs.query(trial_id=TRIAL)
    assert texts(rows) == ["line 0\n", "restarting\n", "shipped\n"]
    assert [(r.source, r.level) for r in rows] == [("task", "INFO"), ("master", "WARNING"), ("task", "DEBUG")]
    assert rows[2].rank_id == 1


def test_batch_whose_insert_failed_is_stored_on_retry(logs: LogService, engine: sa.Engine) -> None:
    failures = ["once"]

    def fail_first_log_insert(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO TASK_LOGS") and failures:
            failures.pop()
            raise RuntimeError("database briefly unavailable")

    append(logs, lines(range(0, 2)))
    sa.event.listen(engine, "before_cursor_execute", fail_first_log_insert)
    try:
        with pytest.raises(RuntimeError, match="unavailable"):
            append(logs, lines(range(2, 5)))
        assert append(logs, lines(range(2, 5))) == 3  # the agent retries the batch
    finally:
        sa.event.remove(engine, "before_cursor_execute", fail_first_log_insert)
    assert [r.seq for r in logs.query(task_id=TASK)] == [0, 1, 2, 3, 4]


def test_each_container_of_a_gang_numbers_its_own_lines(logs: LogService, engine: sa.Engine, clock: FakeClock) -> None:
    """Two agents of one allocation both send seq 0, 1, ...: none is taken for a duplicate, and a
    resent batch from either is still dropped (also by a master that restarted in between)."""
    for agent in ("agent-a", "agent-b"):
        assert logs.append_agent_lines(task_id=TASK, allocation_id=ALLOC, trial_id=TRIAL, agent_id=agent,
                                       lines=lines(range(3))) == 3
    fresh = LogService(engine, clock)
    for agent in ("agent-a", "agent-b"):
        assert fresh.append_agent_lines(task_id=TASK, allocation_id=ALLOC, trial_id=TRIAL, agent_id=agent,
                                        lines=lines(range(4))) == 1
    assert len(logs.query(task_id=TASK)) == 8


def test_a_new_container_stores_its_first_batch_and_still_drops_replays(logs: LogService) -> None:
    """A container this master is starting has no lines: its first batch is stored without
    looking for the last one, and the replays after it are still dropped."""
    logs.new_container(ALLOC, "agent-1")
    assert append(logs, []) == 0
    assert append(logs, lines(range(0, 4))) == 4
    assert append(logs, lines(range(2, 6))) == 2
    assert [r.seq for r in logs.query(task_id=TASK)] == [0, 1, 2, 3, 4, 5]


def test_a_nul_or_a_lone_surrogate_a_task_printed_is_stored_as_a_replacement(logs: LogService) -> None:
    """PostgreSQL's text refuses NUL and no UTF-8 store writes a lone surrogate: the line is
    kept, with U+FFFD in their place, instead of failing the whole batch."""
    assert append(logs, [LogLine(0, "stdout", "a\x00b\udc80c\n", "")]) == 1
    logs.append_shipped(TASK, ALLOC, TRIAL, [{"log": "d\x00e\n"}])
    assert texts(logs.query(task_id=TASK)) == ["a\ufffdb\ufffdc\n", "d\ufffde\n"]
