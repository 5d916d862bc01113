"""Which checkpoints an experiment keeps (pure): Determined's ``checkpoint_storage`` policy.

Keep the union of
- the ``save_experiment_best`` checkpoints of the experiment with the best searcher metric,
- the ``save_trial_best`` best checkpoints of each trial,
- the ``save_trial_latest`` latest checkpoints (most steps) of each trial;
the other COMPLETED or PARTIALLY_DELETED checkpoints are deleted. Whatever the policy, these
are never deleted:
- a checkpoint in ``protected`` (a model version uses it);
- the latest checkpoint of a live trial (a restart resumes from it);
- while a best count is set, a live trial's checkpoint with no validation metric yet (its
  validation may still come, and would rank it);
- a checkpoint of a trial this function was not told about.

A checkpoint's metric is the searcher metric of its trial's validation at the same step
(Determined joins validations to checkpoints on ``steps_completed``); one without a metric is
never among the "best". Equal metrics are ranked by that validation's report order, earlier
first, as 0.38.1's ``ExperimentCheckpointsToGCRaw`` orders by ``metric, validations.id``: a
tie at the cut keeps only as many as the count allows. Two checkpoints at one step share
their validation and so their rank; so do checkpoints at the same step for "latest".
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

COLLECTABLE = ("COMPLETED", "PARTIALLY_DELETED")


@dataclass(frozen=True)
class GcPolicy:
    """How many checkpoints to keep (``checkpoint_storage.save_*``) and the metric's direction."""

    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1
    smaller_is_better: bool = True

    def __post_init__(self) -> None:
        for name in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GcPolicy:
        """The policy of an (expanded) experiment config; Determined's defaults fill gaps."""
        storage = config.get("checkpoint_storage") or {}
        searcher = config.get("searcher") or {}

        def count(key: str, default: int) -> int:
            value = storage.get(key)
            return default if value is None else value

        return cls(count("save_experiment_best", 0), count("save_trial_best", 1),
                   count("save_trial_latest", 1), bool(searcher.get("smaller_is_better", True)))

    @property
    def ranks_by_metric(self) -> bool:
        return self.save_experiment_best > 0 or self.save_trial_best > 0


@dataclass(frozen=True)
class CheckpointFacts:
    """What the policy needs to know of one checkpoint."""

    uuid: str
    trial_id: int
    steps_completed: int
    metric: float | None = None
    state: str = "COMPLETED"
    #: the validation's place in report order (its row id): what breaks a tie in ``metric``
    validation_order: int = 0


@dataclass(frozen=True)
class TrialFacts:
    """What the policy needs to know of one trial."""

    id: int
    live: bool
    latest_checkpoint: str | None = None


def _top(items: list[CheckpointFacts], key: Callable[[CheckpointFacts], Any], n: int) -> set[str]:
    """The uuids ranked within the first ``n`` (rank = 1 + how many are strictly better;
    a smaller key is better)."""
    if n <= 0 or not items:
        return set()
    keys = sorted(key(c) for c in items)
    return {c.uuid for c in items if bisect.bisect_left(keys, key(c)) < n}


def _has_metric(c: CheckpointFacts) -> bool:
    return c.metric is not None and math.isfinite(c.metric)


def select_to_delete(checkpoints: Iterable[CheckpointFacts], trials: Iterable[TrialFacts],
                     policy: GcPolicy, protected: Iterable[str] = ()) -> set[str]:
    """The uuids the policy deletes (see the module docstring for what is always kept)."""
    by_id = {t.id: t for t in trials}
    candidates = [c for c in checkpoints if c.state in COLLECTABLE]
    sign = 1.0 if policy.smaller_is_better else -1.0

    def by_metric(c: CheckpointFacts) -> tuple[float, int]:
        return sign * float(c.metric), c.validation_order  # type: ignore[arg-type]

    keep = set(protected)
    keep |= _top([c for c in candidates if _has_metric(c)], by_metric, policy.save_experiment_best)
    per_trial: dict[int, list[CheckpointFacts]] = {}
    for c in candidates:
        per_trial.setdefault(c.trial_id, []).append(c)
    for trial_id, group in per_trial.items():
        trial = by_id.get(trial_id)
        if trial is None:
            keep |= {c.uuid for c in group}
            continue
        keep |= _top([c for c in group if _has_metric(c)], by_metric, policy.save_trial_best)
        keep |= _top(group, lambda c: -float(c.steps_completed), policy.save_trial_latest)
        if trial.live:
            if trial.latest_checkpoint:
                keep.add(trial.latest_checkpoint)
            if policy.ranks_by_metric:
                keep |= {c.uuid for c in group if not _has_metric(c)}
    return {c.uuid for c in candidates} - keep
