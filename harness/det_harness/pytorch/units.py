"""Training lengths and periods (Determined's ``pytorch.Batch`` / ``pytorch.Epoch``) and the pure
arithmetic on them. No torch here: the trainer and the tests share these helpers."""

from __future__ import annotations

from collections.abc import Container
from typing import Any


class TrainUnit:
    """A length or period of training: ``Batch(100)`` is every 100 batches (or 100 batches);
    ``Batch([5, 30])`` is after batch 5 and batch 30. ``Epoch`` counts whole epochs."""

    def __init__(self, value: int | Container[int]) -> None:
        if isinstance(value, bool) or not (isinstance(value, int) or isinstance(value, Container)):
            raise TypeError(f"{type(self).__name__}() takes an int or a container of ints, "
                            f"got {value!r}")
        if isinstance(value, int) and value < 1:
            raise ValueError(f"{type(self).__name__}({value}): the value must be >= 1")
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.value)))

    def should_stop(self, step_num: int) -> bool:
        """True when ``step_num`` (1-based count of this unit) is a boundary of this period."""
        if isinstance(self.value, int):
            return step_num % self.value == 0
        return step_num in self.value


class Batch(TrainUnit):
    """A number of (global) batches."""


class Epoch(TrainUnit):
    """A number of epochs (an epoch is one pass over the training data loader)."""


def at_boundary(unit: TrainUnit | None, batches_done: int, batches_per_epoch: int) -> bool:
    """Whether the batch that made ``batches_done`` batches ends a period of ``unit``.

    An ``Epoch`` period only ends on the last batch of an epoch."""
    if unit is None or batches_done <= 0:
        return False
    if isinstance(unit, Batch):
        return unit.should_stop(batches_done)
    if isinstance(unit, Epoch):
        epochs, within = divmod(batches_done, batches_per_epoch)
        return within == 0 and unit.should_stop(epochs)
    raise TypeError(f"expected pytorch.Batch or pytorch.Epoch, got {unit!r}")


def length_in_batches(unit: TrainUnit, batches_per_epoch: int) -> int:
    """How many batches a training length is (``Epoch(2)`` with 50 batches an epoch: 100)."""
    if not isinstance(unit.value, int):
        raise ValueError(f"a training length must be a single number, got {unit!r}")
    if isinstance(unit, Batch):
        return unit.value
    if isinstance(unit, Epoch):
        return unit.value * batches_per_epoch
    raise TypeError(f"expected pytorch.Batch or pytorch.Epoch, got {unit!r}")


def progress_in_units(unit: TrainUnit, batches_done: int, batches_per_epoch: int) -> float:
    """``batches_done`` in ``unit``'s own unit (what the searcher operation is measured in)."""
    if isinstance(unit, Epoch):
        return batches_done / batches_per_epoch
    return float(batches_done)


def unit_from_config(value: Any, key: str, global_batch_size: int | None = None) -> TrainUnit | None:
    """A period or length from an experiment config: ``{batches: N}``, ``{epochs: N}``,
    ``{records: N}`` (needs ``global_batch_size``) or a bare int (batches). ``None`` and 0 mean
    "not set"."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a number or {{batches|epochs|records: N}}, got {value!r}")
    if isinstance(value, int):
        return Batch(value) if value > 0 else None
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"{key} must be a number or {{batches|epochs|records: N}}, got {value!r}")
    [(kind, n)] = value.items()
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{key}.{kind} must be a non-negative int, got {n!r}")
    if n == 0:
        return None
    if kind == "batches":
        return Batch(n)
    if kind == "epochs":
        return Epoch(n)
    if kind == "records":
        if not global_batch_size:
            raise ValueError(f"{key} is in records: set the global_batch_size hyperparameter so "
                             "records can be turned into batches")
        return Batch(max(1, n // global_batch_size))
    raise ValueError(f"{key} has unknown unit {kind!r}; use batches, epochs or records")


def searcher_unit(config: dict[str, Any], global_batch_size: int | None = None) -> TrainUnit | None:
    """The training length the experiment's searcher asks for, in its own unit:
    ``searcher.max_length`` (``{batches|epochs|records: N}`` or an int of batches), else
    ``searcher.max_time`` read in ``searcher.time_metric`` (``batches`` or ``epochs``)."""
    searcher = config.get("searcher") or {}
    if searcher.get("max_length") is not None:
        return unit_from_config(searcher["max_length"], "searcher.max_length", global_batch_size)
    if searcher.get("max_time") is not None:
        metric = searcher.get("time_metric") or "batches"
        if metric not in ("batches", "epochs"):
            raise ValueError(
                f"searcher.time_metric is {metric!r}: the Trial API counts only batches or "
                "epochs; set time_metric to one of them or pass max_length= to Trainer.fit()")
        return unit_from_config({metric: searcher["max_time"]}, "searcher.max_time")
    return None
