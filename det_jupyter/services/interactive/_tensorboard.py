"""Pure parts of TensorBoard tasks: what their config holds and the command they run.

A TensorBoard is an interactive task over some experiments' and trials' metrics. It runs
``python3 -m det_jupyter.tasks.tensorboard`` (in the task's own environment, where the
``tensorboard`` package is installed), which turns the stored metrics into event files and
serves TensorBoard under the proxy's path. No I/O and no clock reads here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._common import parse_duration

#: Seconds without proxy traffic after which a TensorBoard is culled (Determined: 5 minutes).
DEFAULT_IDLE_TIMEOUT_S = 300.0


def _ids(raw: Any, key: str) -> tuple[int, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"{key} must be a list of ids, got {raw!r}")
    out = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
                or int(value) <= 0:
            raise ValueError(f"{key} must hold positive integer ids, got {value!r}")
        out.append(int(value))
    return tuple(dict.fromkeys(out))  # unique, in the order given


@dataclass(frozen=True)
class TensorboardSettings:
    """Which metrics a TensorBoard shows and when it is culled."""

    experiment_ids: tuple[int, ...]
    trial_ids: tuple[int, ...]
    idle_timeout_s: float

    @classmethod
    def parse(cls, raw: dict[str, Any], default_timeout_s: float | None) -> TensorboardSettings:
        exps = _ids(raw.get("experiment_ids"), "experiment_ids")
        trials = _ids(raw.get("trial_ids"), "trial_ids")
        if not exps and not trials:
            raise ValueError("a TensorBoard needs experiment ids or trial ids "
                             "(det tensorboard start EXP_ID… or -t TRIAL_ID…)")
        timeout = parse_duration(raw.get("idle_timeout"), "idle_timeout")
        if timeout is None:
            timeout = default_timeout_s or DEFAULT_IDLE_TIMEOUT_S
        return cls(exps, trials, timeout)

    def as_config(self) -> dict[str, Any]:
        return {"experiment_ids": list(self.experiment_ids), "trial_ids": list(self.trial_ids),
                "idle_timeout": self.idle_timeout_s}


def tensorboard_entrypoint(task_id: str, bind: str, port: int, cfg: dict[str, Any]) -> list[str]:
    """The task's argv: metrics to event files, then TensorBoard on ``bind:port`` under
    ``/proxy/<task_id>/``. Its upstream token comes from ``DET_PROXY_TOKEN``."""
    argv = ["python3", "-m", "det_jupyter.tasks.tensorboard", "--port", str(port),
            "--bind", bind, "--base-url", f"/proxy/{task_id}/"]
    for e in cfg.get("experiment_ids") or []:
        argv += ["--experiment", str(e)]
    for t in cfg.get("trial_ids") or []:
        argv += ["--trial", str(t)]
    return argv
