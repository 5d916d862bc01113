"""TensorBoards: what the master checks beyond a proxied task's lifecycle.

Launching one checks that its experiments and trials exist. While it runs, its allocation
token may *read* (GET) exactly those experiments and trials — their trial lists, metrics and
configs — and nothing else; every other route still treats it as a task that owns nothing.
"""

from __future__ import annotations

from typing import Any

from ...errors import DetError, InvalidRequest, NotFound
from ..accounts.auth import AllocationPrincipal
from ._tensorboard import TensorboardSettings

KIND = "TENSORBOARD"


def prepare(views: Any, config: dict[str, Any], experiment_ids: list[Any],
            trial_ids: list[Any]) -> dict[str, Any]:
    """The task config of a new TensorBoard: the request's ids (they win over the config's),
    zero slots unless asked; InvalidRequest for malformed ids, NotFound for missing ones."""
    config = {**config, "experiment_ids": experiment_ids or config.get("experiment_ids"),
              "trial_ids": trial_ids or config.get("trial_ids")}
    resources = config.get("resources")
    if resources is None or isinstance(resources, dict):
        config["resources"] = {"slots": 0, **(resources or {})}  # it needs no accelerator
    try:
        settings = TensorboardSettings.parse(config, None)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    check_sources(views, list(settings.experiment_ids), list(settings.trial_ids))
    return config


def check_sources(views: Any, experiment_ids: list[int], trial_ids: list[int]) -> None:
    """NotFound naming the first experiment or trial that does not exist."""
    for e in experiment_ids:
        if views.experiment(e) is None:
            raise NotFound(f"experiment {e} not found; det experiment list shows them")
    for t in trial_ids:
        if views.trial(t) is None:
            raise NotFound(f"trial {t} not found; det experiment describe EXP shows its trials")


def may_read(commands: Any, views: Any, principal: Any, *, trial_id: int | None = None,
             experiment_id: int | None = None) -> bool:
    """Whether ``principal`` is a TensorBoard task started on this trial (or on its
    experiment) or on this experiment."""
    if not isinstance(principal, AllocationPrincipal) or principal.trial_id is not None:
        return False
    try:
        row = commands.get(principal.task_id, KIND)
    except DetError:
        return False
    cfg = row.config or {}
    exps = {int(e) for e in cfg.get("experiment_ids") or []}
    if experiment_id is not None:  # its own, or the experiment of one of its trials
        return experiment_id in exps or any(
            (v := views.trial(int(t))) is not None and v.row.experiment_id == experiment_id
            for t in cfg.get("trial_ids") or [])
    if trial_id is None:
        return False
    if trial_id in {int(t) for t in cfg.get("trial_ids") or []}:
        return True
    view = views.trial(trial_id)
    return view is not None and view.row.experiment_id in exps
