"""Hyperparameter searchers: pure, deterministic state machines from trial events to actions.

Semantics are Determined 0.38.1's (`single`, `random`, `grid`, `adaptive_asha`,
`async_halving`); state is saved with `Searcher.snapshot()` as versioned JSON.
"""

from __future__ import annotations

from ._actions import Action, Create, ExitedReason, SearcherError, Shutdown, Stop
from ._base import Searcher
from ._brackets import BracketSpec, make_brackets, max_rungs, rung_units
from ._factory import make_searcher
from ._hparams import grid_points, grid_size, sample
from ._preview import TrialSummary, preview

__all__ = [
    "Action",
    "BracketSpec",
    "Create",
    "ExitedReason",
    "Searcher",
    "SearcherError",
    "Shutdown",
    "Stop",
    "TrialSummary",
    "grid_points",
    "grid_size",
    "make_brackets",
    "make_searcher",
    "max_rungs",
    "preview",
    "rung_units",
    "sample",
]
