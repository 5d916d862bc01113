"""Group commit for searcher events: validations that arrive in one event-loop turn share a
transaction per experiment.

One transaction per validation pays a transaction's fixed cost (BEGIN, the log row, the
progress update, COMMIT) each time, and the event loop waits for it: a burst of reports from
many trials pays it once per report. The master queues each validation here and asks its
scheduler hook for one flush; the flush feeds every queued experiment's events, in arrival
order, through ``ExperimentService.searcher_events``.

Durability: the metrics rows are committed before their event is queued (as before this
queue existed, the event's transaction always came after them); the queue only adds, at
most, the rest of the current loop turn to the window in which a crash loses the event but
keeps the rows. Ordering: the flush is scheduled before the reporting request answers, so
anything the answer causes (the trial's exit, its next report) reaches the master later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ._searcher_log import SearcherEvent

log = logging.getLogger("det_jupyter")

Schedule = Callable[[Callable[[], None]], object]


class SearcherBatcher:
    """Queues (experiment, event) pairs and feeds them in one group per experiment.

    ``schedule`` is the hook that runs a callback later (``loop.call_soon``). Without one,
    ``kick`` flushes at once, so callers that use the services directly (tests, tools) see
    the effects synchronously.
    """

    def __init__(self, feed: Callable[[int, list[SearcherEvent]], None]) -> None:
        self._feed = feed
        self._queue: dict[int, list[SearcherEvent]] = {}
        self._pending = False
        self.schedule: Schedule | None = None

    def add(self, exp_id: int, events: list[SearcherEvent]) -> None:
        """Queue events for an experiment's searcher; they follow those already queued."""
        self._queue.setdefault(exp_id, []).extend(events)

    def kick(self) -> None:
        """Flush now (no hook) or once soon (a flush already scheduled covers this one)."""
        if self.schedule is None:
            self.flush()
        elif not self._pending:
            self._pending = True
            self.schedule(self.flush)

    def flush(self) -> None:
        """Feed every queued group. One experiment's failure does not keep the others from
        their searchers; the first error is raised once all were fed."""
        self._pending = False
        queue, self._queue = self._queue, {}
        first: Exception | None = None
        for exp_id, events in queue.items():
            try:
                self._feed(exp_id, events)
            except Exception as exc:
                if first is not None:
                    log.exception("searcher events of experiment %s failed", exp_id)
                first = first or exc
        if first is not None:
            raise first
