"""A trial's restart from its checkpoint, as the store sees it: metrics past it are rewound.

The new run is placed through ``AllocationService.assign``, whose owner (``TrialService``)
archives what the earlier run reported past the checkpoint and moves the trial to a new run.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from det_jupyter.errors import Conflict
from det_jupyter.services.accounts.auth import AuthService
from det_jupyter.services.allocation.service import AllocationOwner, AllocationService, Container
from det_jupyter.services.checkpoints.service import CheckpointService
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.identity import MasterIdentity
from det_jupyter.services.common.late import Late
from det_jupyter.services.experiments.trials import TrialService
from det_jupyter.services.experiments.views import Views
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store.metrics import _series as stored

from ._rows import make_world


def report(group: str, step: int, loss: float) -> Report:
    return Report(group, step, {"loss": loss}, float(step))


@pytest.fixture
def rewound(engine: sa.Engine, clock: FakeClock) -> tuple[MetricService, int]:
    """A trial whose run 1 reported steps 1-4 and a checkpoint at 2, now restarted on run 2."""
    auth = AuthService(engine, clock)
    owner: Late[AllocationOwner] = Late("the allocations' owner")
    allocs = AllocationService(engine, clock, auth, owner=owner, launcher=Late("no resource manager"))
    identity = MasterIdentity(url="http://127.0.0.1:8080", master_id="m-1", cluster_id="c-1")
    owner.bind(TrialService(engine, clock, allocs, identity))
    metrics = MetricService(engine, clock)
    trial_id = make_world(engine)[2]

    metrics.ingest(trial_id, 1, [report("training", s, 1.0 / s) for s in (1, 2, 3, 4)])
    metrics.ingest(trial_id, 1, [report("validation", 2, 0.5), report("validation", 4, 0.1)])
    CheckpointService(engine, clock).report(
        {"uuid": "ckpt-2", "metadata": {"steps_completed": 2}}, trial_id=trial_id, task_id=None,
        allocation_id=None,
    )
    task_id = Views(engine).trial(trial_id).row.task_id  # type: ignore[union-attr]
    with engine.begin() as conn:
        alloc_id = allocs.request(conn, task_id=task_id, trial_id=trial_id, slots=1, priority=42,
                                  resource_pool="default")
    specs = allocs.assign(alloc_id, [Container("agent-1", (0,))])
    assert specs is not None
    spec = specs[0]
    assert spec.env["DET_TRIAL_RUN_ID"] == "2"
    assert spec.env["DET_LATEST_CHECKPOINT"] == "ckpt-2"
    return metrics, trial_id


def _row(engine: sa.Engine, trial_id: int) -> sa.Row:
    view = Views(engine).trial(trial_id)
    assert view is not None
    return view.row


def test_restart_hides_reports_past_the_checkpoint(rewound: tuple[MetricService, int], engine: sa.Engine) -> None:
    metrics, trial_id = rewound
    assert [(h["group"], h["steps_completed"]) for h in metrics.history(trial_id)] == [
        ("training", 1), ("training", 2), ("validation", 2)
    ]
    row = _row(engine, trial_id)
    assert (row.run_id, row.total_batches) == (2, 2)


def test_old_run_is_stale_and_new_run_reports_again(
    rewound: tuple[MetricService, int], engine: sa.Engine
) -> None:
    metrics, trial_id = rewound
    with pytest.raises(Conflict):
        metrics.ingest(trial_id, 1, [report("training", 3, 9.0)])
    metrics.ingest(trial_id, 2, [report("training", 3, 0.4), report("training", 4, 0.3)])
    training = metrics.history(trial_id, "training")
    assert [(h["steps_completed"], h["metrics"]["loss"], h["trial_run_id"]) for h in training] == [
        (1, 1.0, 1), (2, 0.5, 1), (3, 0.4, 2), (4, 0.3, 2)
    ]
    assert _row(engine, trial_id).total_batches == 4


def test_summary_and_best_validation_forget_rewound_reports(
    rewound: tuple[MetricService, int], engine: sa.Engine
) -> None:
    metrics, trial_id = rewound
    metrics.ingest(trial_id, 2, [report("training", 3, 0.4), report("validation", 4, 0.3)])
    row = _row(engine, trial_id)
    loss = row.summary["training"]["loss"]
    assert (loss["count"], loss["last"], loss["min"], loss["max"]) == (3, 0.4, 0.4, 1.0)
    assert row.summary["validation"]["loss"]["count"] == 2
    assert row.best_validation == 0.3


def test_charts_after_a_rewind_show_the_visible_reports_not_the_stored_series(
    rewound: tuple[MetricService, int], engine: sa.Engine
) -> None:
    """The stored series still holds the archived steps 3 and 4; the chart must not."""
    metrics, trial_id = rewound
    with engine.connect() as conn:
        assert stored.read(conn, [trial_id], "training", "loss", 0) == {}
    metrics.ingest(trial_id, 2, [report("training", 3, 0.4), report("training", 4, 0.3)])
    with engine.connect() as conn:
        assert stored.read(conn, [trial_id], "training", "loss", 0) == {}
    points = json.loads(metrics.series([trial_id], "training", ["loss"])[trial_id])
    assert [(p["batches"], p["values"]["loss"]) for p in points] == [(1, 1.0), (2, 0.5), (3, 0.4), (4, 0.3)]
