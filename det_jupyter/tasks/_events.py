"""Stored metrics → TensorBoard event files (the ``tensorboard`` package only: no TensorFlow).

``scalars_from_workloads`` is pure: it turns ``GET /api/v1/trials/{id}/workloads`` entries into
scalar points. ``RunWriter`` appends the points it has not written yet to one run directory's
event file. ``mirror_event_files`` copies event files a trial wrote itself, appending only what
is new (event files only ever grow), so TensorBoard's incremental reader keeps up.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    value: float
    wall_time: float


def validation_tag(name: str) -> str:
    """Validation metrics keep a name that already says so (``validation_loss``, ``val_acc``);
    others get ``val_`` so they do not mix with a training metric of the same name."""
    return name if name.startswith(("val_", "validation")) else f"val_{name}"


def _wall_time(value: Any) -> float:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return 0.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def scalars_from_workloads(workloads: Iterable[dict[str, Any]]) -> list[Scalar]:
    """The scalar points of a trial's workloads: training metrics under their own names,
    validation metrics by ``validation_tag``; non-numeric values and checkpoints are skipped."""
    out: list[Scalar] = []
    for w in workloads:
        for group, tag_of in (("training", str), ("validation", validation_tag)):
            report = w.get(group)
            if not isinstance(report, dict):
                continue
            metrics = (report.get("metrics") or {}).get("avgMetrics") or {}
            step = int(report.get("totalBatches") or 0)
            wall = _wall_time(report.get("endTime"))
            for name, raw in sorted(metrics.items()):
                value = _number(raw)
                if value is not None:
                    out.append(Scalar(tag_of(name), step, value, wall))
    return out


class RunWriter:
    """One run directory (``experiment_<e>/trial_<t>``): appends each (tag, step) once."""

    def __init__(self, logdir: str) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        os.makedirs(logdir, exist_ok=True)
        self._writer = EventFileWriter(logdir, flush_secs=5, filename_suffix=".det-metrics")
        self._seen: set[tuple[str, int]] = set()

    def write(self, scalars: Iterable[Scalar]) -> int:
        """Append the points not written before; flush; return how many were new."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        new = 0
        for s in scalars:
            key = (s.tag, s.step)
            if key in self._seen:
                continue
            self._seen.add(key)
            wall = s.wall_time if s.wall_time > 0 and math.isfinite(s.wall_time) else time.time()
            value = Summary.Value(tag=s.tag, simple_value=s.value)
            self._writer.add_event(Event(wall_time=wall, step=s.step, summary=Summary(value=[value])))
            new += 1
        if new:
            self._writer.flush()
        return new

    def close(self) -> None:
        self._writer.close()


def mirror_event_files(src: str, dst: str) -> int:
    """Copy the new bytes of every ``*tfevents*`` file under ``src`` to the same relative path
    under ``dst``; a file that shrank (rewritten) is copied again whole. Returns bytes copied."""
    copied = 0
    if not os.path.isdir(src):
        return 0
    for root, _dirs, files in os.walk(src):
        for name in files:
            if "tfevents" not in name:
                continue
            source = os.path.join(root, name)
            target = os.path.join(dst, os.path.relpath(source, src))
            try:
                size = os.path.getsize(source)
                have = os.path.getsize(target) if os.path.exists(target) else 0
                if size == have:
                    continue
                if size < have:
                    have = 0
                    os.remove(target)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(source, "rb") as fin, open(target, "ab") as fout:
                    fin.seek(have)
                    chunk = fin.read(size - have)
                    fout.write(chunk)
                    copied += len(chunk)
            except OSError:
                continue  # a file being rotated away: the next refresh tries again
    return copied
