"""Searcher actions, exit reasons and the searcher error type."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class SearcherError(ValueError):
    """A searcher cannot act on what it was given (bad config, bad metrics, bad snapshot)."""


class ExitedReason(enum.Enum):
    """Why a trial exited before the searcher was done with it."""

    ERRORED = "ERRORED"
    USER_CANCELED = "USER_CANCELED"
    INVALID_HP = "INVALID_HP"


@dataclass(frozen=True)
class Create:
    """Create a trial with these hyperparameters and this trial seed.

    `request_id` names the trial in every later event sent to the searcher.
    """

    request_id: str
    hparams: dict[str, Any] = field(hash=False)
    trial_seed: int


@dataclass(frozen=True)
class Stop:
    """Stop a running trial: the caller sends it a preemption signal."""

    request_id: str


@dataclass(frozen=True)
class Shutdown:
    """The search is over: every requested trial has been created and closed.

    `failure` is true when every trial errored; `cancel` when the search's only trial was
    canceled by its user (the experiment ends CANCELED, as in Determined 0.38.1).
    """

    failure: bool = False
    cancel: bool = False


Action = Create | Stop | Shutdown
