"""The task store by id: rows written with the old prefixed ids (``nb-<uuid>``, ``cmd-<uuid>``)
still resolve exactly, their kind from the row; a task with more than one allocation (a generic
task unpaused) is read with its latest; a generic task's state is one key of its config."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import _tables as t
from det_jupyter.store import tasks as store
from tests.contract._rows import NOW, make_user


def _task(
    conn: sa.Connection, owner: int, task_id: str, kind: str, allocs: list[tuple[str, float]]
) -> None:
    conn.execute(
        sa.insert(t.jobs).values(
            job_id=f"job-{task_id}",
            job_type=kind,
            owner_id=owner,
            priority=42,
            weight=1.0,
            resource_pool="default",
            queue_position=NOW,
            submitted_at=NOW,
        )
    )
    store.insert(
        conn,
        task_id=task_id,
        job_id=f"job-{task_id}",
        owner_id=owner,
        description=task_id,
        config={"entrypoint": "true", "task_state": "ACTIVE"},
        context=None,
        start_time=NOW,
        task_type=kind,
        workspace_id=1,
    )
    for n, (state, at) in enumerate(allocs, 1):
        conn.execute(
            sa.insert(t.allocations).values(
                allocation_id=f"{task_id}.{n}",
                task_id=task_id,
                state=state,
                slots=0,
                resource_pool="default",
                submitted_at=at,
                job_id=f"job-{task_id}",
            )
        )


def test_old_prefixed_ids_resolve_exactly_and_keep_their_kind(engine) -> None:
    owner = make_user(engine)
    old_nb, old_cmd = (
        "nb-0a7efc49-250a-4f22-b477-014f60d11da3",
        "cmd-0a7efc49-250a-4f22-b477-014f60d11da3",
    )
    with engine.begin() as conn:
        _task(conn, owner, old_nb, "NOTEBOOK", [("RUNNING", NOW)])
        _task(conn, owner, old_cmd, "COMMAND", [("TERMINATED", NOW)])
        _task(conn, owner, "0a7efc49-250a-4f22-b477-014f60d11da3", "GENERIC", [("PENDING", NOW)])
    with engine.connect() as conn:
        rows = {
            tid: store.get(conn, tid)
            for tid in (old_nb, old_cmd, "0a7efc49-250a-4f22-b477-014f60d11da3")
        }
        assert store.get(conn, "0a7efc49") is None  # no prefix matching
    assert {tid: (r.task_type, r.alloc_state) for tid, r in rows.items()} == {
        old_nb: ("NOTEBOOK", "RUNNING"),
        old_cmd: ("COMMAND", "TERMINATED"),
        "0a7efc49-250a-4f22-b477-014f60d11da3": ("GENERIC", "PENDING"),
    }


def test_a_task_is_read_with_its_latest_allocation_once(engine) -> None:
    owner = make_user(engine)
    with engine.begin() as conn:
        _task(conn, owner, "g", "GENERIC", [("TERMINATED", NOW), ("PENDING", NOW + 5)])
    with engine.connect() as conn:
        row = store.get(conn, "g")
        listed = store.listing(conn, ["GENERIC"])
    assert (row.allocation_id, row.alloc_state) == ("g.2", "PENDING")
    assert [(r.task_id, r.allocation_id) for r in listed] == [("g", "g.2")]


def test_generic_state_and_resume_rewrite_only_their_fields(engine) -> None:
    owner = make_user(engine)
    with engine.begin() as conn:
        _task(conn, owner, "g", "GENERIC", [("TERMINATED", NOW)])
        store.ended(conn, "g", 0, NOW + 1, "killed")
        store.set_config_key(conn, "g", "task_state", "PAUSED")
    with engine.connect() as conn:
        row = store.get(conn, "g")
    assert row.config == {"entrypoint": "true", "task_state": "PAUSED"}
    assert (row.exit_code, row.end_time, row.exit_reason) == (0, NOW + 1, "killed")
    with engine.begin() as conn:
        store.resumed(conn, "g")
    with engine.connect() as conn:
        row = store.get(conn, "g")
    assert (row.exit_code, row.end_time, row.exit_reason) == (None, None, None)
