"""An ``adaptive_asha`` experiment's rung table, read from the store (``GET /api/v1/
experiments/{id}/asha-rungs``): the pure summary is ``det_jupyter.searcher.rungs``, which the
notebook widget computes the same way from what the SDK reads."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from ...searcher.rungs import asha_rungs
from ...store import reader
from ...store import views as store


def experiment_rungs(engine: sa.Engine, exp_id: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per rung (``searcher.rungs.asha_rungs``) of experiment ``exp_id`` whose config
    is ``config``; ``[]`` for other searchers. Two queries, whatever the number of trials."""
    searcher = config.get("searcher") or {}
    if searcher.get("name") != "adaptive_asha":
        return []
    with reader(engine).connect() as conn:
        trials, _ = store.trials(conn, experiment_id=exp_id, count=False)
        reports = store.validation_reports(conn, experiment_id=exp_id)
    validations: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(reports, key=lambda r: (r.trial_id, r.steps_completed, r.id)):
        validations[r.trial_id].append({"steps_completed": r.steps_completed, "metrics": json.loads(r.body)})
    return asha_rungs(searcher, [{"id": t.id, "state": t.state} for t in trials], validations)
