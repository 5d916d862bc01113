"""``core.preempt``: a watcher thread long-polls the master for the preemption signal.

``should_preempt()`` reads the watcher's flag (no request to the master). Only the chief
watches; in a distributed job the chief broadcasts its answer, so every rank must call
``should_preempt()`` at the same points of its loop (Determined's ``WorkersAskChief`` mode) and all
ranks stop at the same step.
"""

from __future__ import annotations

import logging
import threading

from .._errors import APIError
from .._http import Session, TransientError, backoff
from ._distributed import DistributedContext

logger = logging.getLogger("det_harness")


class PreemptContext:
    """Preemption signal of an allocation, watched from a daemon thread."""

    def __init__(
        self, session: Session, allocation_id: str, dist: DistributedContext,
        *, poll_seconds: int = 60,
    ) -> None:
        self._session = session
        self._allocation_id = allocation_id
        self._dist = dist
        self._chief = dist.is_chief
        self._poll_seconds = poll_seconds
        self._flag = threading.Event()
        self._stop = threading.Event()
        self._ack_lock = threading.Lock()
        self._acked = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start watching (the chief only); idempotent."""
        if self._chief and self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="det-preempt-watcher",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop watching. A long-poll in flight is abandoned (the thread is a daemon)."""
        self._stop.set()

    def _watch(self) -> None:
        path = f"/api/v1/allocations/{self._allocation_id}/signals/preemption"
        timeout = 0  # the first call answers at once, so an early signal is seen early
        attempt = 0
        while not self._stop.is_set():
            try:
                resp = self._session.request_once(
                    "GET", f"{path}?timeout_seconds={timeout}", timeout=timeout + 10)
            except (TransientError, APIError) as exc:
                logger.debug("preemption long-poll failed, retrying: %s", exc)
                self._stop.wait(backoff(attempt))
                attempt += 1
                continue
            attempt = 0
            timeout = self._poll_seconds
            if isinstance(resp, dict) and resp.get("preempt"):
                self._flag.set()
                return
        self._session.close()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """True once the master asked this task to stop; the first True acknowledges it.

        After an acknowledgement, exiting with code 0 means "preempted, resume later" (save a
        checkpoint first); pass ``auto_ack=False`` to acknowledge yourself.

        In a distributed job this is a collective: every rank must call it, at the same points
        of its loop, and every rank gets the chief's answer. A rank that skips a call makes the
        others fail with a ``CollectiveError`` after ``DET_COLLECTIVE_TIMEOUT`` seconds.
        """
        if not self._chief:
            return bool(self._dist.broadcast(None))
        if self._thread is None:
            self.start()  # used without `with core.init()`: watch from the first question on
        out = self._flag.is_set()
        if out and auto_ack:
            self.acknowledge_preemption_signal()
        return bool(self._dist.broadcast(out))

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master the signal was seen: an exit 0 now means "preempted" (sent once)."""
        with self._ack_lock:
            if self._acked or not self._chief:
                return
            self._session.request(
                "POST", f"/api/v1/allocations/{self._allocation_id}/signals/ack_preemption", {})
            self._acked = True


class LocalPreemptContext:
    """Off-cluster: nothing ever preempts (a distributed job still synchronises, as on cluster)."""

    def __init__(self, dist: DistributedContext | None = None) -> None:
        self._dist = dist

    def start(self) -> None:
        """No-op."""

    def close(self) -> None:
        """No-op."""

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Always False; in a distributed job every rank must still call it in step."""
        if self._dist is not None:
            self._dist.broadcast(False)
        return False

    def acknowledge_preemption_signal(self) -> None:
        """No-op."""
