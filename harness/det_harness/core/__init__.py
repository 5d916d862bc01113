"""The Core API: ``init()`` and the sub-contexts it composes (see ``det_harness``)."""

from __future__ import annotations

from ._checkpoint import CheckpointContext
from ._context import Context, init
from ._distributed import DistributedContext
from ._preempt import LocalPreemptContext, PreemptContext
from ._searcher import SearcherContext, SearcherOperation
from ._track import TrackedRun, track
from ._train import LocalTrainContext, TrainContext

__all__ = [
    "CheckpointContext",
    "Context",
    "DistributedContext",
    "LocalPreemptContext",
    "LocalTrainContext",
    "PreemptContext",
    "SearcherContext",
    "SearcherOperation",
    "TrackedRun",
    "TrainContext",
    "init",
    "track",
]
