"""Durable searcher state: an append-only event log plus an occasional snapshot.

Writing the whole searcher snapshot on every decision costs O(trials) per event (an ASHA
search of 10,000 trials carries a snapshot of hundreds of KB). Instead each event is one
small row, committed with the decisions it caused; every ``SNAPSHOT_EVERY`` events the
snapshot is rewritten and the log before it dropped. Restoring replays the events after the
snapshot through the (deterministic) searcher, ignoring the actions: they were applied when
the events first happened, in the same transactions as the rows.

``feed`` applies an event at once and ``save`` writes all events fed since the last save as
ONE row (a JSON array; a lone event is stored as its object), so a transaction that feeds a
group of events (a group commit, ``ExperimentService.searcher_events``) pays for one row, one
index entry and one foreign-key check, not one per event: on PostgreSQL a row per event made
the group's write half as dear again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ... import searcher as search
from ...store import searcher_log as store

SNAPSHOT_EVERY = 500
# Built once: json.dumps with options builds an encoder per call, and every event is encoded.
_EVENT_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=True)


@dataclass(frozen=True)
class SearcherEvent:
    """One input to a searcher, as stored."""

    kind: str  # start | trial_created | validation_completed | trial_exited_early | trial_closed
    request_id: str | None = None
    metrics: dict | None = None
    reason: str | None = None

    def apply(self, s: search.Searcher) -> list:
        if self.kind == "start":
            return s.start()
        assert self.request_id is not None
        if self.kind == "trial_created":
            return s.trial_created(self.request_id)
        if self.kind == "validation_completed":
            return s.validation_completed(self.request_id, self.metrics or {})
        if self.kind == "trial_exited_early":
            return s.trial_exited_early(self.request_id, search.ExitedReason(self.reason))
        if self.kind == "trial_closed":
            return s.trial_closed(self.request_id)
        raise ValueError(f"unknown searcher event {self.kind!r}")

    def to_json(self) -> str:
        body: dict[str, Any] = {"kind": self.kind}
        if self.request_id is not None:
            body["rid"] = self.request_id
        if self.metrics is not None:
            body["metrics"] = self.metrics
        if self.reason is not None:
            body["reason"] = self.reason
        return _EVENT_JSON.encode(body)

    @classmethod
    def from_json(cls, text: str) -> SearcherEvent:
        return cls._from_body(json.loads(text))

    @classmethod
    def many_from_json(cls, text: str) -> list[SearcherEvent]:
        """The events of one stored row: a group's array, or one event's object."""
        body = json.loads(text)
        return [cls._from_body(b) for b in body] if isinstance(body, list) else [cls._from_body(body)]

    @classmethod
    def _from_body(cls, body: dict) -> SearcherEvent:
        return cls(body["kind"], body.get("rid"), body.get("metrics"), body.get("reason"))


@dataclass
class _Entry:
    searcher: search.Searcher
    since_snapshot: int = 0
    progress_saved: float | None = None
    unsaved: list[str] = field(default_factory=list)  # events fed since the last save, as JSON


class SearcherLog:
    """Loads, records and snapshots experiments' searchers. Calls take the caller's connection."""

    def __init__(self) -> None:
        self._cache: dict[int, _Entry] = {}

    def forget(self, exp_id: int) -> None:
        """Drop the in-memory searcher (its state may be ahead of a rolled-back transaction)."""
        self._cache.pop(exp_id, None)

    def put(self, exp_id: int, s: search.Searcher) -> None:
        self._cache[exp_id] = _Entry(s)

    def load(self, conn: sa.Connection, exp_id: int) -> search.Searcher:
        entry = self._cache.get(exp_id)
        if entry is not None:
            return entry.searcher
        row = store.inputs(conn, exp_id)
        cfg = row.config
        seed = cfg["reproducibility"]["experiment_seed"]
        state = row.searcher_state or {}
        snap = state.get("snapshot")
        if snap is None:
            s = search.make_searcher(cfg["searcher"], cfg["hyperparameters"], seed)
        else:
            s = search.Searcher.restore(cfg["searcher"], cfg["hyperparameters"], seed, snap)
        replayed = 0
        for payload in store.payloads(conn, exp_id):
            for event in SearcherEvent.many_from_json(payload):
                event.apply(s)
                replayed += 1
        self._cache[exp_id] = _Entry(s, since_snapshot=replayed)
        return s

    def feed(self, conn: sa.Connection, exp_id: int, event: SearcherEvent) -> list:
        """Apply an event to the searcher; returns its actions. The event is logged by the
        next ``save``, which must come in the same transaction."""
        s = self.load(conn, exp_id)
        actions = event.apply(s)
        entry = self._cache[exp_id]
        entry.unsaved.append(event.to_json())
        entry.since_snapshot += 1
        return actions

    def save(self, conn: sa.Connection, exp_id: int, *, force: bool = False) -> None:
        """Log the events fed since the last save and record progress; rewrite the snapshot
        instead (and drop the log) when it is due."""
        self.save_many(conn, [(exp_id, force)])

    def save_many(self, conn: sa.Connection, exps: list[tuple[int, bool]]) -> None:
        """``save`` for several experiments (id, force) in one transaction: their log rows in
        one statement whatever their number, with their progress (on PostgreSQL in the same
        statement; on SQLite, where statements cost no round trip, one per experiment)."""
        logged: list[tuple[int, str]] = []
        progressed: list[tuple[int, float]] = []
        for exp_id, force in exps:
            entry = self._cache[exp_id]
            if force or entry.since_snapshot >= SNAPSHOT_EVERY:
                store.snapshot(conn, exp_id, {"version": 2, "snapshot": entry.searcher.snapshot()})
                entry.since_snapshot = 0
                entry.unsaved = []
            if entry.unsaved:
                # One row whatever the group's size.
                unsaved = entry.unsaved
                logged.append((exp_id, unsaved[0] if len(unsaved) == 1 else "[" + ",".join(unsaved) + "]"))
                entry.unsaved = []
            progress = entry.searcher.progress()
            if progress != entry.progress_saved:
                progressed.append((exp_id, progress))
                entry.progress_saved = progress
        store.write(conn, logged, progressed)

