"""Group commit of searcher events: a group decides and writes what its events one by one do.

Twin experiments (same config, same seed, so the same request ids and hparams) get the same
validations; one is fed event by event, the other a round at a time through
``ExperimentService.searcher_events`` (or the master's batch, flushed by a fake loop hook).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from det_jupyter import config as expconf
from det_jupyter.composition_root import Master, MasterSettings
from det_jupyter.services.accounts.auth import AuthService, User
from det_jupyter.services.allocation.service import AllocationOwner, AllocationService
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.identity import MasterIdentity
from det_jupyter.services.common.late import Late
from det_jupyter.services.experiments.reports import TrialReports
from det_jupyter.services.experiments.searcher_batch import SearcherBatcher
from det_jupyter.services.experiments.searcher_log import SearcherEvent, SearcherLog
from det_jupyter.services.experiments.service import ExperimentService
from det_jupyter.services.experiments.trials import TrialService
from det_jupyter.services.metrics.service import Report
from det_jupyter.store import tables as t
from tests.contract._rows import make_project

CONFIG = json.dumps({
    "name": "twin", "entrypoint": "python3 train.py",
    "searcher": {"name": "adaptive_asha", "metric": "loss", "time_metric": "batches", "max_time": 8,
                 "max_trials": 7, "divisor": 2, "mode": "aggressive", "max_concurrent_trials": 3},
    "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
    "reproducibility": {"experiment_seed": 3},
})
Feed = Callable[[int, list[SearcherEvent]], None]


@dataclass
class World:
    engine: sa.Engine
    experiments: ExperimentService
    user: User
    project: int


@pytest.fixture
def world(engine: sa.Engine, clock: FakeClock) -> World:
    """The experiment and trial services on one database, wired as the master wires them (no
    launcher: a stopped trial's pending allocation ends at once and closes the trial)."""
    auth = AuthService(engine, clock)
    auth.bootstrap("Pw-12345678")
    owner: Late[AllocationOwner] = Late("the allocations' owner")
    allocs = AllocationService(engine, clock, auth, owner=owner, launcher=Late("no resource manager"))
    identity = MasterIdentity(url="http://127.0.0.1:8080", master_id="m-1", cluster_id="c-1")
    trials_late: Late[TrialService] = Late("trials")
    experiments = ExperimentService(engine, clock, expconf.MasterDefaults(
        checkpoint_storage={"type": "shared_fs", "host_path": "/tmp/det-contract-ckpts"}), trials=trials_late)
    trials = TrialService(engine, clock, allocs, identity, experiments=experiments)
    trials_late.bind(trials)
    owner.bind(trials)
    user = auth.user_by_name("admin")
    return World(engine, experiments, user, make_project(engine, user.id))


def _create(w: World) -> int:
    row, _ = w.experiments.create(w.user, CONFIG, [], project_id=w.project)
    assert row is not None
    return row.id


def _validation(rid: str, step: int, **extra: object) -> SearcherEvent:
    loss = random.Random(f"{rid}:{step}").random()
    return SearcherEvent("validation_completed", rid, metrics={"loss": loss, "batches": step, **extra})


def _active(engine: sa.Engine, exp_id: int) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(
            sa.select(t.trials.c.request_id)
            .where(t.trials.c.experiment_id == exp_id, t.trials.c.state == "ACTIVE")
            .order_by(t.trials.c.id)
        ).scalars())


def _state(engine: sa.Engine, exp_id: int) -> dict:
    """What the searcher decided, as the database holds it."""
    with engine.connect() as conn:
        exp = conn.execute(
            sa.select(t.experiments.c.state, t.experiments.c.progress, t.experiments.c.searcher_shutdown,
                      t.experiments.c.error_message)
            .where(t.experiments.c.id == exp_id)
        ).one()
        trials = conn.execute(
            sa.select(t.trials.c.request_id, t.trials.c.state, t.trials.c.hparams, t.trials.c.seed,
                      t.trials.c.searcher_stopped)
            .where(t.trials.c.experiment_id == exp_id)
            .order_by(t.trials.c.id)
        ).all()
        restored = SearcherLog().load(conn, exp_id).snapshot()
    return {"experiment": tuple(exp), "trials": [tuple(r) for r in trials], "searcher": restored}


def _rounds(w: World, exp_id: int, feed: Feed) -> Iterator[dict]:
    """Every live trial reports its next validation (every 2 batches) until the search ends;
    yields the state after each round."""
    steps: dict[str, int] = {}
    for _ in range(100):  # the search takes about 12 rounds
        rids = _active(w.engine, exp_id)
        if not rids:
            return
        events = []
        for rid in rids:
            steps[rid] = steps.get(rid, 0) + 2
            events.append(_validation(rid, steps[rid]))
        feed(exp_id, events)
        yield _state(w.engine, exp_id)
    raise AssertionError("the search did not end")


def _one_by_one(w: World) -> Feed:
    def feed(exp_id: int, events: list[SearcherEvent]) -> None:
        for event in events:
            w.experiments.searcher_event(exp_id, event)
    return feed


def test_a_group_decides_and_writes_what_its_events_one_by_one_do(world: World) -> None:
    single, grouped = _create(world), _create(world)
    reference = list(_rounds(world, single, _one_by_one(world)))
    assert list(_rounds(world, grouped, world.experiments.searcher_events)) == reference
    assert len(reference[-1]["trials"]) == 7
    assert any(stopped for *_, stopped in reference[-1]["trials"])
    assert reference[-1]["experiment"][:3] == ("COMPLETED", 1.0, True)


@pytest.mark.parametrize("bad, raised", [
    ({"loss": "NaN-ish", "batches": 4}, None),  # a searcher error: the experiment fails, as alone
    ({"loss": 0.5, "batches": 4, "blob": object()}, TypeError),  # anything else is raised, as alone
])
def test_a_failing_group_loses_no_other_event(world: World, bad: dict, raised: type | None) -> None:
    single, grouped = _create(world), _create(world)
    first, second = _active(world.engine, single)[:2]
    events = [_validation(first, 2), SearcherEvent("validation_completed", first, metrics=bad),
              _validation(second, 2)]
    failed: list[type] = []
    for event in events:
        try:
            world.experiments.searcher_event(single, event)
        except Exception as exc:
            failed.append(type(exc))
    assert failed == ([raised] if raised else [])
    if raised:
        with pytest.raises(raised):
            world.experiments.searcher_events(grouped, events)
    else:
        world.experiments.searcher_events(grouped, events)
    after = _state(world.engine, grouped)
    assert after == _state(world.engine, single)
    seen = json.dumps(after["searcher"])  # the events around the bad one reached the searcher
    assert all(str(e.metrics["loss"]) in seen for e in (events[0], events[2]))  # type: ignore[index]
    if not raised:
        assert after["experiment"][0] == "ERROR" and "searcher error" in after["experiment"][3]


def test_several_experiments_groups_in_one_transaction_decide_what_each_alone_does(world: World) -> None:
    """``searcher_events_many``: two experiments' rounds fed together (one transaction)
    decide and write what feeding each experiment's round alone does; a group that fails
    rolls back the transaction and is then fed alone, so the other experiment loses nothing."""
    single_a, single_b = _create(world), _create(world)
    together_a, together_b = _create(world), _create(world)
    steps: dict[tuple[int, str], int] = {}

    def round_of(exp_id: int) -> list[SearcherEvent]:
        out = []
        for rid in _active(world.engine, exp_id):
            steps[(exp_id, rid)] = steps.get((exp_id, rid), 0) + 2
            out.append(_validation(rid, steps[(exp_id, rid)]))
        return out

    for _ in range(100):
        ra, rb = round_of(single_a), round_of(single_b)
        if not ra and not rb:
            break
        for exp_id, events in ((single_a, ra), (single_b, rb)):
            if events:
                world.experiments.searcher_events(exp_id, events)
        ta, tb = round_of(together_a), round_of(together_b)
        world.experiments.searcher_events_many({e: ev for e, ev in ((together_a, ta), (together_b, tb)) if ev})
        assert _state(world.engine, together_a) == _state(world.engine, single_a)
        assert _state(world.engine, together_b) == _state(world.engine, single_b)
    assert _state(world.engine, together_a)["experiment"][:3] == ("COMPLETED", 1.0, True)
    # A bad group: the transaction rolls back, each group is fed alone; the other is unharmed.
    bad, good, good_alone = _create(world), _create(world), _create(world)
    rid_bad, rid_good = _active(world.engine, bad)[0], _active(world.engine, good)[0]
    world.experiments.searcher_events(good_alone, [_validation(rid_good, 2)])
    world.experiments.searcher_events_many({
        bad: [SearcherEvent("validation_completed", rid_bad, metrics={"loss": "NaN-ish", "batches": 2})],
        good: [_validation(rid_good, 2)]})
    assert _state(world.engine, good) == _state(world.engine, good_alone)
    failed = _state(world.engine, bad)["experiment"]
    assert failed[0] == "ERROR" and "searcher error" in failed[3], failed


class RecordingFeed:
    """Feeds a flush's groups on to the experiment service and records (experiment, group
    size) for each."""

    def __init__(self, feed: Callable[[dict[int, list[SearcherEvent]]], None]) -> None:
        self.feed = feed
        self.groups: list[tuple[int, int]] = []

    def __call__(self, groups: dict[int, list[SearcherEvent]]) -> None:
        self.groups.extend((exp_id, len(events)) for exp_id, events in groups.items())
        self.feed(groups)


def test_the_master_feeds_one_loop_turn_of_validations_as_one_group(engine: sa.Engine, tmp_path: Path) -> None:
    """Three trials report in one loop turn: nothing reaches the searcher until the one
    scheduled flush runs; the searcher then holds what a master without a hook decides."""
    master = Master(MasterSettings(data_dir=str(tmp_path), db_url=engine.url.render_as_string(hide_password=False),
                                   url="http://127.0.0.1:8080", agent_token="tok",
                                   initial_password="Pw-12345678"))
    try:
        user = master.auth.user_by_name("admin")
        batched, direct = (master.experiments.create(user, CONFIG, [])[0].id for _ in range(2))
        recorder = RecordingFeed(master.experiments.searcher_events_many)
        batch = SearcherBatcher(recorder)
        reports = TrialReports(master.metrics, master.webhooks, batch)

        def report_round(exp_id: int) -> None:
            with engine.connect() as conn:
                live = conn.execute(
                    sa.select(t.trials.c.id, t.trials.c.request_id)
                    .where(t.trials.c.experiment_id == exp_id).order_by(t.trials.c.id)
                ).all()
            for trial_id, rid in live:
                reports.report(trial_id, None, [Report("validation", 2, _validation(rid, 2).metrics, 0.0)])

        loop_turn: list[Callable[[], None]] = []
        batch.schedule = loop_turn.append
        report_round(batched)
        assert len(loop_turn) == 1 and recorder.groups == []  # one flush pending, nothing fed yet
        loop_turn.pop()()
        assert recorder.groups == [(batched, 3)]
        batch.schedule = None
        report_round(direct)  # no hook: fed before report_metrics returns, as callers expect
        assert recorder.groups[1:] == [(direct, 1)] * 3
        assert _state(engine, batched)["searcher"] == _state(engine, direct)["searcher"]
    finally:
        master.stop()
