"""The state an unmanaged experiment takes from its trials, and what a trial's process may set."""

from __future__ import annotations

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.common.states import State
from det_jupyter.services.experiments.unmanaged import patched_state, rolled_up_state


@pytest.mark.parametrize(("trials", "experiment"), [
    ([], None),
    (["PAUSED"], State.PAUSED),
    (["PAUSED", "RUNNING"], State.RUNNING),
    (["COMPLETED", "RUNNING", "ERROR"], State.RUNNING),
    (["COMPLETED", "ERROR"], State.COMPLETED),
    (["ERROR", "PAUSED"], State.ERROR),
    (["CANCELED", "CANCELED"], State.CANCELED),
    (["CANCELED", "PAUSED"], State.PAUSED),
    (["STOPPING_KILLED"], None),  # not an unmanaged trial's state: no say
])
def test_the_most_advanced_trial_sets_the_experiment_state(trials: list[str], experiment: State | None) -> None:
    assert rolled_up_state(trials) == experiment


@pytest.mark.parametrize(("wire", "stored"), [
    ("STATE_RUNNING", State.RUNNING), ("STATE_ACTIVE", State.RUNNING), ("STATE_COMPLETED", State.COMPLETED),
    ("STATE_ERROR", State.ERROR), ("STATE_PAUSED", State.PAUSED), ("STATE_CANCELED", State.CANCELED),
])
def test_a_process_sets_its_trial_running_or_ended(wire: str, stored: State) -> None:
    assert patched_state(wire) == stored


@pytest.mark.parametrize("wire", ["STATE_STOPPING_KILLED", "STATE_QUEUED", "STATE_UNSPECIFIED", "RUNNING"])
def test_other_states_are_refused_naming_the_field(wire: str) -> None:
    with pytest.raises(InvalidRequest, match="^state: "):
        patched_state(wire)
