"""``GET /api/v1/experiments/{id}/asha-rungs``: the rung table of an ``adaptive_asha``
experiment (the JupyterLab experiment page's; ``services.experiments.rungs``)."""

from __future__ import annotations

from ..services.access.authz import Perm
from ..services.experiments.rungs import experiment_rungs
from ._api import api
from ._base import DetHandler
from ._experiments import get_view


class ExperimentRungsHandler(DetHandler):
    """``{"rungs": [{"rung", "units", "timeMetric", "reached", "stopped", "running", "best"}]}``:
    per rung, its time-metric threshold and the trial ids that reached it, stopped there
    (ended with it as their highest) or run on with it as their highest; ``best``: the best
    searcher metric reported at it. Empty for other searchers."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    @api()
    def get(self, exp_id: str) -> None:
        view = get_view(self, int(exp_id))
        config = view.row.config or {}
        searcher = config.get("searcher") or {}
        length = searcher.get("max_length")
        time_metric = searcher.get("time_metric") or (
            next(iter(length), "batches") if isinstance(length, dict) else "batches")
        rungs = experiment_rungs(self.master.engine, int(exp_id), config)
        self.send({"rungs": [{**r, "timeMetric": time_metric} for r in rungs]})
