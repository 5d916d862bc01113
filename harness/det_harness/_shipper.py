"""Non-blocking metric reporting: callers append to a bounded buffer, one thread ships batches.

The caller's cost is a tuple, a lock and a deque append (a few microseconds); encoding JSON and
talking to the master happen in the daemon thread through
``POST /api/v1/trials/{id}/metrics/batch``. While the master is unreachable the thread retries
with backoff and the buffer keeps the newest ``max_buffer`` reports (the dropped count is logged
once). ``flush()`` waits until everything queued before the call was acknowledged (2xx).

While the master is down the thread also *spills* the buffer: it encodes queued reports into
zlib-compressed JSON fragments, a few bytes each instead of the caller's dict, so an outage
costs little memory; the fragments are sent first, in order, once the master answers.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
import zlib
from typing import Any

from ._buffer import Item, ReportBuffer, encode_items
from ._errors import APIError
from ._http import Session, TransientError, backoff

logger = logging.getLogger("det_harness")

# Spilled reports: (first seq, count, zlib-compressed comma-joined JSON report objects).
_Spill = tuple[int, int, bytes]

SPILL_MIN = 1000  # spill only when at least this many reports wait
SPILL_CHUNK = 10_000  # reports per compressed fragment


def wrap_batch(trial_run_id: int, fragments: list[bytes]) -> bytes:
    """The batch route's body (docs/internals.md) around encoded report fragments."""
    return b'{"trialRunId":%d,"reports":[' % trial_run_id + b",".join(f for f in fragments if f) + b"]}"


class Shipper:
    """Buffers reports and progress for one trial and ships them from a daemon thread."""

    def __init__(
        self,
        session: Session,
        trial_id: int,
        trial_run_id: int,
        *,
        max_buffer: int = 1_000_000,
        max_batch: int = 2000,
        retry_base: float = 0.5,
    ) -> None:
        if max_buffer < 1 or max_batch < 1:
            raise ValueError("max_buffer and max_batch must be >= 1")
        self._session = session
        self._trial_id = trial_id
        self._run_id = trial_run_id
        self._max_batch = max_batch
        self._retry_base = retry_base
        self._buf = ReportBuffer(max_buffer)
        self._max_buffer = max_buffer
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)  # notified when a batch is acknowledged
        self._wake = threading.Event()
        self._inflight_first: int | None = None  # first seq of the batch being sent
        self._spilled: collections.deque[_Spill] = collections.deque()
        self._spilled_count = 0
        self._spilling_first: int | None = None  # first seq of reports being spilled now
        self._enqueued = 0
        self._progress: float | None = None
        self._progress_inflight = False
        self._give_up_at: float | None = None  # set by close(): stop retrying after this
        self._closing = False
        self._close_ok = True
        self._gave_up = 0  # batches dropped after the close deadline (never acknowledged)
        self.dropped = 0
        self._drop_logged = False
        self._thread = threading.Thread(target=self._run, name="det-metrics-shipper", daemon=True)
        self._thread.start()

    # -- caller side (hot path) ------------------------------------------------------------
    def report(self, group: str, steps_completed: int, metrics: Any) -> None:
        """Queue one report; never blocks on the network."""
        now = time.time()
        with self._lock:
            self._enqueued += 1
            self.dropped += self._buf.append(self._enqueued, group, steps_completed, metrics, now)
        if not self._wake.is_set():
            self._wake.set()

    def set_progress(self, progress: float) -> None:
        """Queue a progress update; only the latest one is sent."""
        with self._lock:
            self._progress = progress
        if not self._wake.is_set():
            self._wake.set()

    # -- waiting ------------------------------------------------------------------------------
    def _handled_upto(self) -> int:
        # Reports are handled in order, so everything before the oldest pending one is done.
        pending = [self._inflight_first, self._spilling_first,
                   self._spilled[0][0] if self._spilled else None, self._buf.first_seq()]
        firsts = [p for p in pending if p is not None]
        return min(firsts) - 1 if firsts else self._enqueued

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every report and progress queued so far is acknowledged; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            target = self._enqueued
        self._wake.set()
        with self._done:
            while self._handled_upto() < target or self._progress is not None or self._progress_inflight:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._done.wait(min(left, 0.5))
        return True

    def close(self, timeout: float = 60.0) -> bool:
        """Flush (bounded by ``timeout``) and stop the thread; False if reports were lost.

        Idempotent: a second call (e.g. from atexit) returns at once.
        """
        if self._closing:
            return self._close_ok
        self._give_up_at = time.monotonic() + timeout
        # Reports given up on (the master unreachable until the deadline) were lost too, even
        # though the thread is done with them.
        ok = self.flush(timeout) and not self._gave_up
        self._close_ok = ok
        self._closing = True
        self._wake.set()
        self._thread.join(timeout=1.0)
        if not ok:
            with self._lock:
                lost = self._enqueued - self._handled_upto()
            logger.warning("det_harness: %d metric reports were not acknowledged by the master "
                           "before exit", lost)
        return ok

    # -- shipper thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while not self._closing:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            while self._ship_once():
                pass

    def _ship_once(self) -> bool:
        """Send one batch and/or the latest progress; return True if anything was sent."""
        with self._lock:
            spills: list[_Spill] = []
            batch: list[Item] = []
            if self._spilled:
                while self._spilled and (not spills or sum(c for _, c, _ in spills) < self._max_batch):
                    spills.append(self._spilled.popleft())
                self._spilled_count -= sum(c for _, c, _ in spills)
                self._inflight_first = spills[0][0]
            else:
                batch = self._buf.take(self._max_batch)
                self._inflight_first = batch[0].first_seq if batch else None
            progress, self._progress = self._progress, None
            self._progress_inflight = progress is not None
        if self.dropped and not self._drop_logged:
            self._drop_logged = True
            logger.warning("det_harness: the metrics buffer is full (%d reports) because the "
                           "master is not answering; dropping the oldest reports",
                           self._max_buffer)
        path = f"/api/v1/trials/{self._trial_id}/metrics/batch"
        if spills:
            self._send(path, lambda: wrap_batch(self._run_id, [zlib.decompress(b) for _, _, b in spills]))
        elif batch:
            self._send(path, lambda: wrap_batch(self._run_id, [encode_items(batch)]))
        if progress is not None:
            self._send(f"/api/v1/trials/{self._trial_id}/progress",
                       lambda: json.dumps({"progress": progress, "is_raw": True}).encode())
        with self._done:
            self._inflight_first = None
            self._progress_inflight = False
            self._done.notify_all()
        return bool(batch or spills) or progress is not None

    def _wait_spilling(self, delay: float) -> None:
        """Sleep ``delay`` seconds before a retry, compressing new reports as they arrive."""
        end = time.monotonic() + delay
        while True:
            self._spill()
            left = end - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(left, 0.05))
            self._wake.clear()

    def _spill(self, budget: int = 100_000) -> None:
        """Compress waiting reports (the master is down): memory per report drops ~30x."""
        while budget > 0:
            with self._lock:
                if self._buf.count < SPILL_MIN:
                    return
                chunk = self._buf.take(SPILL_CHUNK)
                self._spilling_first = chunk[0].first_seq
            n = sum(len(item) for item in chunk)
            try:
                blob = zlib.compress(encode_items(chunk), 1)
            except (TypeError, ValueError) as exc:
                logger.error("det_harness: cannot encode metrics, dropping %d reports: %s", n, exc)
                blob = b""
            with self._lock:
                self._spilled.append((chunk[0].first_seq, n, blob or zlib.compress(b"", 1)))
                self._spilled_count += n
                self._spilling_first = None
                while self._spilled and self._spilled_count + self._buf.count > self._max_buffer:
                    _, count, _ = self._spilled.popleft()
                    self._spilled_count -= count
                    self.dropped += count
            budget -= n

    def _send(self, path: str, encode: Any) -> None:
        try:
            data = encode()
        except (TypeError, ValueError) as exc:
            logger.error("det_harness: cannot encode metrics for %s, dropping them: %s", path, exc)
            return
        attempt = 0
        while True:
            try:
                self._session.request_once("POST", path, data=data)
                return
            except APIError as exc:
                # A refusal will not change on retry; keep the stream moving.
                logger.error("det_harness: the master refused %s: %s", path, exc.message)
                return
            except TransientError as exc:
                if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                    logger.error("det_harness: giving up on %s: %s", path, exc)
                    self._gave_up += 1
                    return
                if attempt == 3:
                    logger.warning("det_harness: master unreachable, retrying: %s", exc)
                delay = backoff(attempt, self._retry_base)
                if self._give_up_at is not None:
                    delay = min(delay, max(0.0, self._give_up_at - time.monotonic()))
                self._wait_spilling(delay)
                attempt += 1
