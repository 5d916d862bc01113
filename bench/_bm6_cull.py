"""BM-6's idle-cull figures: the master's culler (``NotebookService``) watching many notebook
sessions, in this process, on a real migrated SQLite store.

Setup (untimed): ``sessions`` running notebooks written straight to the tables (a job, a
command and a RUNNING allocation each, as the scheduler leaves them), every one pointed at the
loopback backend, which answers Jupyter's ``api/status``, ``api/kernels``, ``api/terminals``
and ``api/sessions`` for any notebook id: one server standing in for all the notebook servers
(the fake sessions of benchmarks.md). The service reads its rows through the real
``CommandService``; only its ``kill`` is replaced (it marks the allocation TERMINATED in the
store and records the time) and the users (everyone is an admin). Time is a FakeClock moved by
the loop, so a 60 s timeout runs in a few seconds; the I/O is real.

Measured:
- ``sweep``: ``NotebookService.sweep``, the idle decision over every watched session (memory
  only: what the looks, the tasks' ``report_idle`` and the proxy's traffic recorded). p50 of 200.
- ``tick``: the whole once-a-second pass with no look due (the read of running tasks, then the
  sweep). p50 of 20.
- ``look round``: one tick in which every session's look is due (4 GETs each). Once, for
  information: real notebooks become ready at different times, so their looks spread over
  the interval.
- ``culls within timeout + 1 tick``: half the sessions report activity (``report_idle`` with
  ``idle: false``) every 10 s, the other half nothing. With a 60 s timeout and 30 s looks, the
  loop advances the clock 1 s per tick until every quiet session is culled: the latest cull
  after its last activity, and that no active session was culled.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.interactive.commands import CommandService
from det_jupyter.services.interactive.notebooks import NotebookService
from det_jupyter.store import _tables as t
from det_jupyter.store import make_engine, migrate, sqlite_url

TIMEOUT_S = 60.0
LOOK_INTERVAL_S = 30.0


class _Commands(CommandService):
    """The real reads; ``kill`` ends the allocation in the store and records when."""

    def __init__(self, engine: sa.Engine, clock: FakeClock) -> None:
        super().__init__(engine, clock, allocations=None, identity=None)  # type: ignore[arg-type]
        self.killed: dict[str, float] = {}

    def kill(self, user: Any, task_id: str, kind: str = "COMMAND", reason: str | None = None) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.update(t.allocations).where(t.allocations.c.task_id == task_id)
                         .values(state="TERMINATED", exit_reason=reason))
        self.killed[task_id] = self._clock.now()


class _Users:
    def user_by_id(self, user_id: int) -> Any:
        return SimpleNamespace(id=user_id, admin=True, active=True, username="admin")


def _store(path: Path, sessions: int, backend: str, now: float) -> tuple[sa.Engine, list[str]]:
    engine = make_engine(sqlite_url(str(path)))
    migrate(engine)
    ids = [f"nb-{i:04d}-{uuid.uuid4().hex[:8]}" for i in range(sessions)]
    with engine.begin() as conn:
        user = conn.execute(sa.insert(t.users).values(
            username="bench", password_hash="x", admin=True, active=True, created_at=now,
            modified_at=now).returning(t.users.c.id)).scalar_one()
        conn.execute(sa.insert(t.jobs), [dict(
            job_id=f"job-{i}", job_type="NOTEBOOK", owner_id=user, priority=42, weight=1.0,
            resource_pool="default", queue_position=now + n, submitted_at=now) for n, i in enumerate(ids)])
        conn.execute(sa.insert(t.commands), [dict(
            task_id=i, job_id=f"job-{i}", owner_id=user, description=f"Notebook ({i})",
            config={"idle_timeout": TIMEOUT_S, "notebook_idle_type": "kernels_or_terminals",
                    "work_dir": "/tmp", "entrypoint": "notebook", "resources": {"slots": 0}},
            start_time=now, task_type="NOTEBOOK", proxy_token="t", proxy_address=backend)
            for i in ids])
        conn.execute(sa.insert(t.allocations), [dict(
            allocation_id=f"{i}.1", task_id=i, state="RUNNING", slots=0, resource_pool="default",
            submitted_at=now, start_time=now, job_id=f"job-{i}") for i in ids])
    return engine, ids


def _p50_ms(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2] * 1e3


async def _run(backend_port: int, sessions: int, tmp: Path) -> dict[str, Any]:
    clock = FakeClock()
    engine, ids = _store(tmp / "cull.db", sessions, f"127.0.0.1:{backend_port}", clock.now())
    commands = _Commands(engine, clock)
    svc = NotebookService(commands, _Users(), clock, secret="bench", idle_check_interval=LOOK_INTERVAL_S)
    try:
        t0 = time.perf_counter()
        await svc.tick()  # probes every session: all become ready and watched
        probe_round_s = time.perf_counter() - t0
        if len(svc.culler.watched) != sessions:
            raise RuntimeError(f"{len(svc.culler.watched)} of {sessions} sessions became ready; is the backend up?")
        active = set(ids[::2])
        sweeps = []
        for _ in range(200):
            t0 = time.perf_counter()
            decided = svc.culler.sweep(clock.now())
            sweeps.append(time.perf_counter() - t0)
        assert not decided
        ticks = []
        for _ in range(20):
            t0 = time.perf_counter()
            await svc.tick()
            ticks.append(time.perf_counter() - t0)
        # Quiet sessions culled: 1 s of fake time per tick; the active half reports every 10 s.
        last_activity = {i: clock.now() for i in ids}  # ready (the probe's answer) is activity
        look_round_s, looked = 0.0, 0
        for second in range(1, int(TIMEOUT_S + 3 * LOOK_INTERVAL_S)):
            clock.advance(1.0)
            if second % 10 == 0:
                for i in active:
                    svc.report_idle(i, False)
                    last_activity[i] = clock.now()
            t0 = time.perf_counter()
            await svc.tick()
            spent = time.perf_counter() - t0
            if second == int(LOOK_INTERVAL_S):
                # Every quiet session's first look falls due here (the active ones report).
                look_round_s, looked = spent, sessions - len(active)
            if all(i in commands.killed for i in ids if i not in active):
                break
        quiet = [i for i in ids if i not in active]
        missed = [i for i in quiet if i not in commands.killed]
        late = max(commands.killed[i] - last_activity[i] for i in quiet if i in commands.killed)
    finally:
        engine.dispose()
    return {
        "cull_sessions": sessions,
        "cull_sweep_p50_ms": _p50_ms(sweeps),
        "cull_tick_p50_ms": _p50_ms(ticks),
        "cull_probe_round_s": probe_round_s,
        "cull_look_round_s": look_round_s,
        "cull_look_round_sessions": looked,
        "cull_timeout_s": TIMEOUT_S,
        "cull_look_interval_s": LOOK_INTERVAL_S,
        "cull_latest_after_activity_s": late,
        "cull_past_timeout_s": late - TIMEOUT_S,
        "cull_within_timeout_plus_tick": not missed and late <= TIMEOUT_S + 1.0,
        "cull_quiet_not_culled": len(missed),
        "cull_active_culled": sum(i in commands.killed for i in active),
    }


def cull_figures(backend_port: int, sessions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bm6-cull-") as tmp:
        return asyncio.run(_run(backend_port, sessions, Path(tmp)))
