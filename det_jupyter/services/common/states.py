"""Experiment, trial and allocation states, with their allowed transitions (0.38.1's tables)."""

from __future__ import annotations

import enum


class State(str, enum.Enum):
    """Experiment and trial states as stored (without the ``STATE_`` prefix of the wire)."""

    ACTIVE = "ACTIVE"
    #: Unmanaged experiments and trials only (0.38.1's core_v2): the process that reports into
    #: it says it runs. A managed trial stays ACTIVE and is shown RUNNING from its allocations.
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_KILLED = "STOPPING_KILLED"
    STOPPING_ERROR = "STOPPING_ERROR"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"

    @property
    def wire(self) -> str:
        return "STATE_" + self.value


TERMINAL = frozenset({State.COMPLETED, State.CANCELED, State.ERROR})
STOPPING = frozenset(
    {State.STOPPING_COMPLETED, State.STOPPING_CANCELED, State.STOPPING_KILLED, State.STOPPING_ERROR}
)

# Where each STOPPING_* state ends once nothing runs any more.
STOPPING_END = {
    State.STOPPING_COMPLETED: State.COMPLETED,
    State.STOPPING_CANCELED: State.CANCELED,
    State.STOPPING_KILLED: State.CANCELED,
    State.STOPPING_ERROR: State.ERROR,
}

_EXPERIMENT_TRANSITIONS: dict[State, frozenset[State]] = {
    State.ACTIVE: frozenset({State.PAUSED, *STOPPING, State.ERROR, State.COMPLETED, State.CANCELED}),
    State.RUNNING: frozenset({State.PAUSED, State.ERROR, State.COMPLETED, State.CANCELED}),
    State.PAUSED: frozenset({State.ACTIVE, *STOPPING, State.ERROR, State.CANCELED}),
    State.STOPPING_COMPLETED: frozenset({State.COMPLETED, State.STOPPING_KILLED, State.STOPPING_ERROR, State.STOPPING_CANCELED}),
    State.STOPPING_CANCELED: frozenset({State.CANCELED, State.STOPPING_KILLED}),
    State.STOPPING_KILLED: frozenset({State.CANCELED}),
    State.STOPPING_ERROR: frozenset({State.ERROR, State.STOPPING_KILLED}),
    State.COMPLETED: frozenset(),
    State.CANCELED: frozenset(),
    State.ERROR: frozenset(),
}


def can_transition(src: State, dst: State) -> bool:
    """Whether an experiment (or trial) may move from ``src`` to ``dst``."""
    return src == dst or dst in _EXPERIMENT_TRANSITIONS[src]


class AllocState(str, enum.Enum):
    PENDING = "PENDING"
    ASSIGNED = "ASSIGNED"
    PULLING = "PULLING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"


LIVE_ALLOC = (AllocState.ASSIGNED.value, AllocState.PULLING.value, AllocState.RUNNING.value,
              AllocState.TERMINATING.value)
