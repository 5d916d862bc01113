"""Live notebook widgets (ipywidgets, and our own chart widget), fed only by the master's REST API.

    from det_jupyter import widgets
    widgets.experiments()          # the experiments list: filter, sort, pause/activate/kill
    widgets.experiment(3)          # curves per trial, ASHA rungs, hyperparameters, best trial
    widgets.trial(7)               # a chart per metric, metrics table, log tail, checkpoints, crash
    widgets.job_queue()            # positions, why waiting, priority/weight, move ahead/behind
    widgets.cluster()              # agents, slots, GPU utilisation and memory
    widgets.model_registry()       # models, their versions; register, create, archive

Each takes an optional ``det`` (an SDK ``Determined`` session; default ``client.current()``).
What they show is computed by the pure functions of ``_views``; a background thread per
widget polls every 1.5–2 s, sends only what changed, and stops when the experiment or trial
has ended or the widget is closed.
"""

from __future__ import annotations

from typing import Any

from ._cluster import ClusterWidget, JobQueueWidget
from ._experiments import ExperimentsWidget, ExperimentWidget
from ._poll import Poller
from ._registry import ModelRegistryWidget
from ._trial import TrialWidget

__all__ = [
    "ClusterWidget", "ExperimentWidget", "ExperimentsWidget", "JobQueueWidget",
    "ModelRegistryWidget", "Poller", "TrialWidget", "cluster", "experiment", "experiments",
    "job_queue", "model_registry", "trial",
]


def experiments(det: Any = None, **kw: Any) -> ExperimentsWidget:
    return ExperimentsWidget(det, **kw)


def experiment(experiment_id: int, det: Any = None, **kw: Any) -> ExperimentWidget:
    return ExperimentWidget(experiment_id, det, **kw)


def trial(trial_id: int, det: Any = None, **kw: Any) -> TrialWidget:
    return TrialWidget(trial_id, det, **kw)


def job_queue(det: Any = None, **kw: Any) -> JobQueueWidget:
    return JobQueueWidget(det, **kw)


def cluster(det: Any = None, **kw: Any) -> ClusterWidget:
    return ClusterWidget(det, **kw)


def model_registry(det: Any = None, **kw: Any) -> ModelRegistryWidget:
    return ModelRegistryWidget(det, **kw)
