"""What a trial's container runs for its config's ``entrypoint``.

A Trial class (``model_def:MyTrial``, Determined's legacy form) runs through the harness's
Trial runner, and through our launcher when the trial has several slots (one worker per slot).
Anything else (a command line or an argv list) runs as written."""

from __future__ import annotations

import re
from typing import Any

TRIAL_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
HARNESS = ["python3", "-m", "det_harness.exec.harness"]
LAUNCHER = ["python3", "-m", "det_harness.launch.torch_distributed"]


def is_trial_class(entrypoint: Any) -> bool:
    """Whether ``entrypoint`` names a Trial class (``module:Class``) rather than a command."""
    return isinstance(entrypoint, str) and bool(TRIAL_CLASS.match(entrypoint.strip()))


def trial_entrypoint(entrypoint: str | list[str], slots_per_trial: int) -> str | list[str]:
    """The command a trial's containers run for ``entrypoint``."""
    if not is_trial_class(entrypoint):
        return entrypoint
    assert isinstance(entrypoint, str)
    argv = [*HARNESS, entrypoint.strip()]
    return argv if slots_per_trial <= 1 else [*LAUNCHER, *argv]
