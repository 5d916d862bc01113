"""det_harness: the Core API inside a det-jupyter task (Determined 0.38.1's ``determined.core``).

Standard library only, and cheap to import: ``det_harness.core`` (threads, HTTP) is loaded on
first use of ``det_harness.core``.

    import det_harness as det

    with det.core.init() as core:
        for op in core.searcher.operations():
            ...
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})

``det_harness.pytorch`` is the PyTorch Trial API (``PyTorchTrial``, ``Trainer``); it imports torch,
and only when it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import APIError, InvalidHP
from .info import ClusterInfo, TrialInfo, get_cluster_info

if TYPE_CHECKING:
    from . import core, pytorch

__all__ = ["APIError", "ClusterInfo", "InvalidHP", "TrialInfo", "core", "get_cluster_info", "preload",
           "pytorch"]


def preload() -> None:
    """Import what a task's ``core.init()`` needs (the Core API and the HTTP client). The agent's
    warm launcher calls it once, so every task it forks starts with them loaded."""
    import http.client  # noqa: F401

    from . import core  # noqa: F401


def __getattr__(name: str) -> Any:
    # `det.core` and `det.pytorch` (which imports torch) are imported lazily so that
    # `import det_harness` stays a few milliseconds.
    if name in ("core", "pytorch"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
