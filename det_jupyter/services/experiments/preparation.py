"""An experiment's config checked and expanded, its context packed and its searcher made:
the pure, heavy part of creating one (no shared state; safe in a thread)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import config as expconf
from ... import names as _names
from ... import searcher as search
from ...errors import InvalidConfig

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig

MAX_EXPERIMENT_NAME = 512  # characters a PATCH may set (a one-line name, not a paragraph)
#: What an unmanaged experiment's config is checked with when it has no entrypoint (nothing
#: runs it, so 0.38.1 needs none); it is stored without one.
_NO_ENTRYPOINT = "unmanaged"


@dataclass(frozen=True)
class PreparedExperiment:
    """An experiment checked and expanded but not stored (``ExperimentService.prepare``)."""

    config_text: str  # as submitted: stored as its original config
    config: dict[str, Any]  # expanded, defaults filled
    tgz: bytes  # the model definition, packed
    searcher: Any  # search.Searcher, fresh; None when prepared only to validate



def prepare(config_text: str, files: list[dict], defaults: expconf.MasterDefaults, *, validate_only: bool = False,
            raw: dict[str, Any] | None = None, unmanaged: bool = False) -> PreparedExperiment:
    """The pure, heavy part of ``create``: parse (unless ``raw``, the text already parsed
    by ``expconf.parse_yaml``), validate and expand the config, pack the context, make the
    searcher (not when ``validate_only`` or ``unmanaged``: no searcher runs an unmanaged
    experiment, which needs no entrypoint either). Touches no shared state: safe in a
    thread."""
    if raw is None:
        raw = expconf.parse_yaml(config_text)
    seed = raw.get("reproducibility", {}).get("experiment_seed") if isinstance(raw.get("reproducibility"), dict) else None
    if seed is None:
        seed = secrets.randbelow(2**31)
    no_entrypoint = unmanaged and raw.get("entrypoint") is None
    if no_entrypoint:
        raw = {**raw, "entrypoint": _NO_ENTRYPOINT}
    config = expconf.expand_experiment_config(raw, defaults, seed=seed)
    if no_entrypoint:
        config["entrypoint"] = None
    # Shown on one line everywhere (tables, widgets, the sidebar): the rules PATCH applies.
    _names.check_text("experiment name (the config's name)", config["name"],
                      max_len=MAX_EXPERIMENT_NAME, empty=False)
    if config.get("labels") is not None:
        config["labels"] = _names.check_labels(config["labels"], "config label")
    tgz = expconf.context_to_tgz(files or [])
    if validate_only or unmanaged:
        return PreparedExperiment(config_text, config, tgz, None)
    # Make the searcher now so a config it rejects fails the request, not a later event.
    try:
        searcher = search.make_searcher(config["searcher"], config["hyperparameters"], seed)
    except ValueError as exc:
        raise InvalidConfig(f"searcher: {exc}", field="searcher") from exc
    return PreparedExperiment(config_text, config, tgz, searcher)


def job_values(config: dict, resources: ResourceConfig | None) -> dict[str, Any]:
    """The experiment's job settings from ``resources``, its pool checked to exist."""
    res = config.get("resources") or {}
    pool = res.get("resource_pool") or ""
    default_priority = 42
    if resources is not None:
        try:
            resources.check_pool(pool)
        except ValueError as exc:
            raise InvalidConfig(str(exc), field="resources.resource_pool") from exc
        slots = int(res.get("slots_per_trial", 1))
        default_priority = resources.pools[
            resources.pool_for(pool, slots)].scheduler.default_priority
    return {
        "priority": int(res.get("priority") or default_priority),
        "weight": float(res.get("weight") or 1.0),
        "max_slots": res.get("max_slots"),
        "resource_pool": pool,
    }
