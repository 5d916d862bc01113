"""Group commit for searcher events: events that arrive in one event-loop turn share one
transaction, whatever their experiments.

One transaction per validation pays a transaction's fixed cost (BEGIN, the log row, the
progress update, COMMIT) each time, and the event loop waits for it: a burst of reports from
many trials pays it once per report. The master queues each validation here and asks its
scheduler hook for one flush; the flush feeds every queued experiment's events, in arrival
order, through ``ExperimentService.searcher_events_many`` (every experiment's group in one
transaction; should that fail, one experiment at a time, so a bad one costs the others nothing).

Durability: the metrics rows are committed before their event is queued (as before this
queue existed, the event's transaction always came after them); the queue only adds, at
most, the rest of the current loop turn to the window in which a crash loses the event but
keeps the rows. Ordering: the flush is scheduled before the reporting request answers, so
anything the answer causes (the trial's exit, its next report) reaches the master later.
"""

from __future__ import annotations

from collections.abc import Callable

from .searcher_log import SearcherEvent

Schedule = Callable[[Callable[[], None]], object]
#: Feeds the queued groups: experiment id -> its events, in arrival order.
Feed = Callable[[dict[int, list[SearcherEvent]]], None]


class SearcherBatcher:
    """Queues (experiment, event) pairs and feeds them as one group per experiment, all the
    groups of a flush together.

    ``schedule`` is the hook that runs a callback later (``loop.call_soon``). Without one,
    ``kick`` flushes at once, so callers that use the services directly (tests, tools) see
    the effects synchronously.
    """

    def __init__(self, feed: Feed) -> None:
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
        """Feed every queued group (the feed's errors are raised once every group was fed;
        the queue is consumed either way: nothing is fed twice)."""
        self._pending = False
        queue, self._queue = self._queue, {}
        if queue:
            self._feed(queue)
