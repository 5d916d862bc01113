"""The searcher event log: whatever the snapshot cadence, a restored searcher decides the same."""

from __future__ import annotations

import random
import uuid

import pytest
import sqlalchemy as sa

from det_jupyter import searcher as search
from det_jupyter.services.experiments import searcher_log as _searcher_log
from det_jupyter.services.experiments.searcher_log import SearcherEvent, SearcherLog
from det_jupyter.store import tables as t
from tests.contract._rows import NOW, make_project, make_user

SEARCHER = {
    "name": "adaptive_asha", "metric": "loss", "smaller_is_better": True, "time_metric": "batches",
    "max_time": 16, "max_trials": 12, "divisor": 2, "max_rungs": 5, "mode": "standard",
    "max_concurrent_trials": 3, "bracket_rungs": [],
}
HPARAMS = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": None}}


def _experiment(engine: sa.Engine) -> int:
    user = make_user(engine, "u-" + uuid.uuid4().hex[:8])
    project = make_project(engine, user)
    config = {"searcher": SEARCHER, "hyperparameters": HPARAMS, "reproducibility": {"experiment_seed": 11}}
    with engine.begin() as conn:
        return conn.execute(sa.insert(t.experiments).values(
            state="ACTIVE", name="asha", labels=[], owner_id=user, project_id=project,
            job_id=uuid.uuid4().hex, config=config, original_config="{}", searcher_type="adaptive_asha",
            start_time=NOW,
        ).returning(t.experiments.c.id)).scalar_one()


def _drive(engine: sa.Engine, exp_id: int, log: SearcherLog, restart_every: int, group: int = 1) -> list:
    """Run a whole search through the log, dropping the in-memory searcher every few
    transactions (as a master restart does); each transaction feeds up to ``group`` queued
    events (a group commit, stored as one row); returns every action in order."""
    rng = random.Random(5)
    out: list = []
    queue = [SearcherEvent("start")]
    running: dict[str, int] = {}
    n = 0
    while queue or running:
        if not queue:
            rid = rng.choice(sorted(running))
            step = running[rid] + 4
            running[rid] = step
            queue.append(SearcherEvent("validation_completed", rid, metrics={"loss": rng.random(), "batches": step}))
            if step >= 16:
                queue.append(SearcherEvent("trial_closed", rid))
        events, queue[:group] = queue[:group], []
        for event in events:
            if event.kind == "trial_closed":
                running.pop(event.request_id, None)
        with engine.begin() as conn:
            actions = [a for event in events for a in log.feed(conn, exp_id, event)]
            log.save(conn, exp_id)
        n += 1
        if n % restart_every == 0:
            log.forget(exp_id)
        for a in actions:
            out.append(a)
            if isinstance(a, search.Create):
                running[a.request_id] = 0
                queue.append(SearcherEvent("trial_created", a.request_id))
            elif isinstance(a, search.Stop) and a.request_id in running:
                queue.append(SearcherEvent("trial_closed", a.request_id))
                running.pop(a.request_id)
    return out


@pytest.mark.parametrize("snapshot_every", [1, 7, 10_000])
def test_replay_gives_the_same_decisions(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch,
                                         snapshot_every: int) -> None:
    monkeypatch.setattr(_searcher_log, "SNAPSHOT_EVERY", snapshot_every)
    reference = _drive(engine, _experiment(engine), SearcherLog(), restart_every=10**9)
    restarted = _drive(engine, _experiment(engine), SearcherLog(), restart_every=3)
    assert restarted == reference
    assert any(isinstance(a, search.Stop) for a in reference)
    assert sum(isinstance(a, search.Create) for a in reference) == 12


@pytest.mark.parametrize("snapshot_every", [7, 10_000])
def test_a_group_is_one_row_and_replays_event_by_event(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch,
                                                         snapshot_every: int) -> None:
    monkeypatch.setattr(_searcher_log, "SNAPSHOT_EVERY", snapshot_every)
    reference = _drive(engine, _experiment(engine), SearcherLog(), restart_every=10**9, group=4)
    exp_id = _experiment(engine)
    restarted = _drive(engine, exp_id, SearcherLog(), restart_every=2, group=4)
    assert restarted == reference
    assert sum(isinstance(a, search.Create) for a in reference) == 12
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.searcher_events.c.payload).where(
            t.searcher_events.c.experiment_id == exp_id)).scalars().all()
    if snapshot_every == 10_000:  # no snapshot dropped the log: some rows hold several events
        assert any(p.startswith("[") for p in rows)


def test_rows_of_one_event_each_still_load(engine: sa.Engine) -> None:
    """A database written before groups were one row: one event object per row."""
    exp_id = _experiment(engine)
    live = SearcherLog()
    with engine.begin() as conn:
        created = [a.request_id for a in live.feed(conn, exp_id, SearcherEvent("start"))
                   if isinstance(a, search.Create)]
        live.save(conn, exp_id)
        events = [SearcherEvent("trial_created", rid) for rid in created]
        events.append(SearcherEvent("validation_completed", created[0], metrics={"loss": 0.5, "batches": 1}))
        for event in events:
            live.feed(conn, exp_id, event)
        live._cache[exp_id].unsaved = []  # written below the old way instead
        conn.execute(sa.insert(t.searcher_events), [{"experiment_id": exp_id, "payload": e.to_json()} for e in events])
    with engine.connect() as conn:
        restored = SearcherLog().load(conn, exp_id)
    assert restored.snapshot() == live.load(None, exp_id).snapshot()  # type: ignore[arg-type]


def test_snapshot_drops_the_log(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_searcher_log, "SNAPSHOT_EVERY", 5)
    exp_id = _experiment(engine)
    log = SearcherLog()
    with engine.begin() as conn:
        log.feed(conn, exp_id, SearcherEvent("start"))
        log.save(conn, exp_id)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.searcher_events)).scalar_one() == 1
    with engine.begin() as conn:
        log.save(conn, exp_id, force=True)
        state = conn.execute(sa.select(t.experiments.c.searcher_state).where(t.experiments.c.id == exp_id)).scalar()
        assert conn.execute(sa.select(sa.func.count()).select_from(t.searcher_events)).scalar_one() == 0
    assert state["snapshot"]["version"] == 1


def test_event_json_round_trip() -> None:
    for event in [SearcherEvent("start"), SearcherEvent("trial_closed", "r"),
                  SearcherEvent("validation_completed", "r", metrics={"loss": float("nan"), "b": 3}),
                  SearcherEvent("trial_exited_early", "r", reason="INVALID_HP")]:
        back = SearcherEvent.from_json(event.to_json())
        assert back.kind == event.kind and back.request_id == event.request_id and back.reason == event.reason
