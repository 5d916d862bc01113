"""CheckpointService on each backend: storing, the trial's latest checkpoint, storage ids."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from det_jupyter.errors import InvalidRequest, NotFound
from det_jupyter.services.checkpoints.gc import CheckpointGC
from det_jupyter.services.checkpoints.service import CheckpointService
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.experiments.views import Views
from det_jupyter.store import tables as t

from ._rows import NOW, make_trial, make_world


@pytest.fixture
def ckpts(engine: sa.Engine, clock: FakeClock) -> CheckpointService:
    return CheckpointService(engine, clock)


@pytest.fixture
def world(engine: sa.Engine) -> tuple[int, int, int]:
    return make_world(engine)


def checkpoint(uuid: str, steps: int, **extra: object) -> dict:
    return {
        "uuid": uuid,
        "metadata": {"steps_completed": steps, "framework": "torch"},
        "resources": {"state_dict.pth": 1024, "code/": 0},
        **extra,
    }


def _latest(engine: sa.Engine, trial_id: int) -> str | None:
    view = Views(engine).trial(trial_id)
    assert view is not None
    return view.row.latest_checkpoint


def _report(ckpts: CheckpointService, trial_id: int, ckpt: dict) -> None:
    ckpts.report(ckpt, trial_id=trial_id, task_id="task-1", allocation_id="task-1.1")


def test_report_stores_the_checkpoint(
    ckpts: CheckpointService, world: tuple[int, int, int], clock: FakeClock
) -> None:
    _, exp_id, trial_id = world
    _report(ckpts, trial_id, checkpoint("c-10", 10))
    row = ckpts.get("c-10")
    assert (row.trial_id, row.experiment_id, row.steps_completed) == (trial_id, exp_id, 10)
    assert (row.task_id, row.allocation_id, row.state) == ("task-1", "task-1.1", "COMPLETED")
    assert row.resources == {"state_dict.pth": "1024", "code/": "0"}
    assert row.ckpt_metadata["framework"] == "torch"
    assert row.report_time == clock.now()
    assert [c.uuid for c in ckpts.for_experiment(exp_id)] == ["c-10"]


def test_report_time_from_the_wire_is_kept(ckpts: CheckpointService, world: tuple[int, int, int]) -> None:
    _report(ckpts, world[2], checkpoint("c-1", 1, reportTime="2026-01-01T00:00:00Z"))
    assert ckpts.get("c-1").report_time == 1_767_225_600.0


def test_latest_checkpoint_only_moves_forward(
    ckpts: CheckpointService, engine: sa.Engine, world: tuple[int, int, int]
) -> None:
    trial_id = world[2]
    assert _latest(engine, trial_id) is None
    _report(ckpts, trial_id, checkpoint("c-10", 10))
    assert _latest(engine, trial_id) == "c-10"
    _report(ckpts, trial_id, checkpoint("c-5", 5))  # a late report of an older checkpoint
    assert _latest(engine, trial_id) == "c-10"
    _report(ckpts, trial_id, checkpoint("c-20", 20))
    assert _latest(engine, trial_id) == "c-20"
    assert [c.uuid for c in ckpts.for_trial(trial_id)] == ["c-5", "c-10", "c-20"]


def test_duplicate_uuid_is_a_no_op(
    ckpts: CheckpointService, engine: sa.Engine, world: tuple[int, int, int]
) -> None:
    trial_id = world[2]
    _report(ckpts, trial_id, checkpoint("c-10", 10))
    _report(ckpts, trial_id, checkpoint("c-20", 20))
    _report(ckpts, trial_id, checkpoint("c-10", 30))  # a retry, even with other content
    assert ckpts.get("c-10").steps_completed == 10
    assert len(ckpts.for_trial(trial_id)) == 2
    assert _latest(engine, trial_id) == "c-20"


def test_checkpoint_without_trial(ckpts: CheckpointService) -> None:
    ckpts.report(checkpoint("c-free", 3), trial_id=None, task_id="cmd-1", allocation_id=None)
    row = ckpts.get("c-free")
    assert (row.trial_id, row.experiment_id, row.task_id) == (None, None, "cmd-1")


@pytest.mark.parametrize(
    ("ckpt", "message"),
    [
        ({"metadata": {"steps_completed": 1}}, "uuid"),
        ({"uuid": "", "metadata": {"steps_completed": 1}}, "uuid"),
        ({"uuid": "c"}, "steps_completed"),
        ({"uuid": "c", "metadata": {"framework": "torch"}}, "steps_completed"),
        ({"uuid": "c", "metadata": {"steps_completed": "ten"}}, "integer"),
        ({"uuid": "c", "metadata": {"steps_completed": 1}, "resources": ["a"]}, "resources"),
    ],
    ids=["no-uuid", "empty-uuid", "no-metadata", "no-steps", "bad-steps", "bad-resources"],
)
def test_invalid_report_is_rejected_and_stores_nothing(
    ckpts: CheckpointService, world: tuple[int, int, int], ckpt: dict, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        _report(ckpts, world[2], ckpt)
    assert ckpts.for_trial(world[2]) == []


def test_unknown_checkpoint_is_not_found(ckpts: CheckpointService) -> None:
    with pytest.raises(NotFound):
        ckpts.get("nope")


def test_storage_id_is_stable_per_config(ckpts: CheckpointService) -> None:
    config = {"type": "shared_fs", "host_path": "/tmp/ckpts", "save_trial_best": 1}
    first = ckpts.storage_id(config)
    assert ckpts.storage_id(dict(reversed(list(config.items())))) == first
    other = ckpts.storage_id({"type": "shared_fs", "host_path": "/elsewhere"})
    assert other != first
    assert ckpts.storage_id(config) == first
    assert ckpts.storage_id({"type": "shared_fs", "host_path": "/elsewhere"}) == other


def test_gc_keeps_each_trials_best_and_latest_by_the_validations_at_its_checkpoints(
    ckpts: CheckpointService, engine: sa.Engine, world: tuple[int, int, int]
) -> None:
    """The policy (save_trial_best 1, save_trial_latest 1) reads the trials with collectable
    checkpoints and the validations at their steps only: better losses at other steps, an
    archived (rewound) validation and a trial without checkpoints change nothing."""
    _, exp_id, done = world
    live, plain = make_trial(engine, exp_id), make_trial(engine, exp_id)
    losses = {done: {10: 0.5, 20: 0.1, 30: 0.3}, live: {10: 0.2, 20: 0.4, 30: 0.6}}
    rows = []
    for trial, at in losses.items():
        for step in at:
            _report(ckpts, trial, checkpoint(f"{trial}-{step}", step))
    for trial in (done, live, plain):
        for step in range(5, 45, 5):
            loss = losses.get(trial, {}).get(step, 0.001)  # not a checkpoint's step: the best
            rows.append({"trial_id": trial, "trial_run_id": 1, "mgroup": "validation",
                         "steps_completed": step, "report_time": NOW, "body": json.dumps({"loss": loss}),
                         "archived": False})
    rows.append({**rows[1], "body": json.dumps({"loss": 0.0}), "archived": True})  # rewound: not seen
    with engine.begin() as conn:
        conn.execute(sa.insert(t.metrics), rows)
        conn.execute(sa.update(t.trials).where(t.trials.c.id == done).values(state="COMPLETED"))
    gc = CheckpointGC(engine)
    assert sorted(gc.collect(exp_id)) == sorted([f"{done}-10", f"{live}-20"])
    assert gc.collect(exp_id) == []  # nothing more to collect
