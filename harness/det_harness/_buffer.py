"""The report buffer: compact in memory, in order, bounded.

A training loop reports the same metric names step after step. Runs of such reports (same
group, same names, all values floats) are stored column-wise in ``array`` blocks — about 8
bytes per value instead of a dict per report — so holding 100k reports while the master is
unreachable costs a few MB. Anything else (ints, nested values, tensors) is kept as it came.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import time
from array import array
from collections.abc import Iterator
from typing import Any

BLOCK_MAX = 1024  # reports per column block


@functools.lru_cache(maxsize=8)
def _utc_second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def iso_utc(t: float) -> str:
    """ISO-8601 UTC with microseconds and a ``Z`` suffix, the form Go's RFC 3339 parser
    accepts. The date and time of day are formatted once per second (a batch holds thousands
    of reports from the same few seconds)."""
    second = math.floor(t)
    return f"{_utc_second(second)}.{int((t - second) * 1e6):06d}Z"


def to_json(obj: Any) -> Any:
    """``json.dumps`` default: torch/numpy scalars and arrays become numbers/lists, else repr."""
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            return item()
        except (ValueError, RuntimeError, TypeError):
            pass
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    return repr(obj)


class Block:
    """Consecutive reports of one group with the same float metrics, stored by column."""

    __slots__ = ("first_seq", "group", "keys", "steps", "times", "values")

    def __init__(self, first_seq: int, group: str, keys: tuple[str, ...]) -> None:
        self.first_seq = first_seq
        self.group = group
        self.keys = keys
        self.steps = array("q")
        self.times = array("d")
        self.values = array("d")

    def __len__(self) -> int:
        return len(self.steps)

    def rows(self) -> Iterator[tuple[str, int, dict, float]]:
        k = len(self.keys)
        for i in range(len(self.steps)):
            values = self.values[i * k:(i + 1) * k]
            # zip without strict=: the harness also runs on Pythons before 3.10.
            yield self.group, self.steps[i], dict(zip(self.keys, values)), self.times[i]  # noqa: B905

    def json_rows(self) -> list[str] | None:
        """The block's report objects as JSON text, filled into one template (a finite float's
        repr is its JSON), at a third of the encoder's cost per report; None when a value is
        NaN or infinite (JSON has no spelling for it: the encoder's is used)."""
        if not all(map(math.isfinite, self.values)):
            return None
        names = ",".join(json.dumps(key).replace("%", "%%") + ":%r" for key in self.keys)
        template = ('{"group":' + json.dumps(self.group).replace("%", "%%")
                    + ',"stepsCompleted":%d,"metrics":{' + names + '},"reportTime":"%s"}')
        k = len(self.keys)
        values, times = self.values, self.times
        return [template % (step, *values[i * k:(i + 1) * k], iso_utc(times[i]))
                for i, step in enumerate(self.steps)]


class Single:
    """One report kept as given (values that are not all floats)."""

    __slots__ = ("first_seq", "group", "metrics", "steps", "time")

    def __init__(self, seq: int, group: str, steps: int, metrics: Any, t: float) -> None:
        self.first_seq = seq
        self.group = group
        self.steps = steps
        self.metrics = metrics
        self.time = t

    def __len__(self) -> int:
        return 1

    def rows(self) -> Iterator[tuple[str, int, Any, float]]:
        yield self.group, self.steps, self.metrics, self.time


Item = Block | Single


# One encoder for every batch: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(default=to_json, separators=(",", ":"))


def encode_items(items: list[Item]) -> bytes:
    """The report objects of a batch, comma-joined (no enclosing list). Float blocks fill their
    template; runs of other reports are encoded as one list, its brackets cut off."""
    parts: list[str] = []
    loose: list[dict] = []
    for item in items:
        text = item.json_rows() if type(item) is Block else None
        if text is None:
            loose.extend({"group": g, "stepsCompleted": s, "metrics": m, "reportTime": iso_utc(t)}
                         for g, s, m, t in item.rows())
            continue
        if loose:
            parts.append(_ENCODER.encode(loose)[1:-1])
            loose = []
        parts.extend(text)
    if loose:
        parts.append(_ENCODER.encode(loose)[1:-1])
    return ",".join(parts).encode()


class ReportBuffer:
    """Reports in order, as blocks and singles. Not thread-safe: the Shipper holds its lock."""

    def __init__(self, max_reports: int) -> None:
        self.max_reports = max_reports
        self.items: collections.deque[Item] = collections.deque()
        self.count = 0

    def append(self, seq: int, group: str, steps: int, metrics: Any, t: float) -> int:
        """Add one report; returns how many old reports were dropped to stay in bounds."""
        last = self.items[-1] if self.items else None
        if type(metrics) is dict and type(steps) is int:
            keys = tuple(metrics)
            vals = list(metrics.values())
            if all(type(v) is float for v in vals):
                if not (type(last) is Block and last.group == group and last.keys == keys
                        and len(last) < BLOCK_MAX):
                    last = Block(seq, group, keys)
                    self.items.append(last)
                last.values.fromlist(vals)
                last.steps.append(steps)
                last.times.append(t)
                self.count += 1
                return self._trim()
        self.items.append(Single(seq, group, steps, metrics, t))
        self.count += 1
        return self._trim()

    def _trim(self) -> int:
        dropped = 0
        while self.count > self.max_reports and len(self.items) > 1:
            old = self.items.popleft()
            self.count -= len(old)
            dropped += len(old)
        return dropped

    def take(self, max_reports: int) -> list[Item]:
        """Remove and return the oldest items, about ``max_reports`` reports (at least one item)."""
        out: list[Item] = []
        n = 0
        while self.items and (not out or n + len(self.items[0]) <= max_reports):
            item = self.items.popleft()
            n += len(item)
            out.append(item)
        self.count -= n
        return out

    def first_seq(self) -> int | None:
        return self.items[0].first_seq if self.items else None

    def steps(self) -> list[int]:
        """The buffered reports' steps, oldest first (for tests and diagnostics)."""
        return [s for item in self.items for _, s, _, _ in item.rows()]
