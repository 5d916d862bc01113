"""Delivering webhook bodies: a bounded queue and a few sender threads, off every request path.

Each delivery is a real HTTP POST (``urllib``) with a timeout, signed when it carries a key
(``_webhook_payloads.headers``). A 5xx answer or a connection failure is retried after an
exponentially growing wait, up to ``attempts`` tries in all (0.38.1: three); a 4xx or a
redirect is final. Failures are logged, never raised: a webhook that is down costs the
cluster nothing but a log line. When the queue is full a new delivery is dropped and logged
rather than waited for, so no caller ever blocks.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from . import payloads as wp

log = logging.getLogger("det_jupyter.webhooks")


@dataclass(frozen=True)
class Delivery:
    url: str
    body: bytes
    what: str  # for the log: "webhook 3 (EXPERIMENT_STATE_CHANGE of experiment 7)"
    signed: bool = True


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a new target: a webhook posts where it was told to."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


def post(url: str, body: bytes, key: str | None, timeout_s: float, now: Callable[[], float] = time.time) -> int:
    """POST ``body`` to ``url`` once; the answer's status (an HTTP error's too). Raises
    OSError when the receiver cannot be reached or does not answer in ``timeout_s``."""
    request = urllib.request.Request(url, data=body, method="POST", headers=wp.headers(key, int(now()), body))
    try:
        with _OPENER.open(request, timeout=timeout_s) as resp:
            resp.read(64 * 1024)
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


class Shipper:
    """Sends deliveries on ``workers`` threads; ``key()`` is the signing key at send time."""

    def __init__(self, key: Callable[[], str], *, workers: int = 4, max_queue: int = 1000,
                 attempts: int = 3, first_backoff_s: float = 1.0, timeout_s: float = 10.0) -> None:
        self._key = key
        self._queue: queue.Queue[Delivery | None] = queue.Queue(maxsize=max_queue)
        self._delays = wp.backoff_delays(attempts, first_backoff_s)
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"det-webhook-sender-{i}", daemon=True)
                         for i in range(workers)]
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            for th in self._threads:
                th.start()

    def submit(self, delivery: Delivery) -> bool:
        """Queue a delivery; False (and a log line) when the queue is full or stopped."""
        if self._stop.is_set():
            log.warning("webhooks are stopping: %s not sent", delivery.what)
            return False
        try:
            self._queue.put_nowait(delivery)
            return True
        except queue.Full:
            log.error("webhook queue full (%d waiting): %s dropped", self._queue.qsize(), delivery.what)
            return False

    def stop(self, wait_s: float = 2.0) -> None:
        """Stop the senders: those between tries give up; what is still queued is dropped."""
        self._stop.set()
        for _ in self._threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break
        deadline = time.monotonic() + wait_s
        for th in self._threads if self._started else ():
            th.join(max(0.0, deadline - time.monotonic()))
        left = self._queue.qsize()
        if left:
            log.warning("%d webhook deliveries were still queued at shutdown and are not sent", left)

    def _run(self) -> None:
        while not self._stop.is_set():
            delivery = self._queue.get()
            if delivery is None or self._stop.is_set():
                return
            try:
                self.deliver(delivery)
            except Exception:  # a bug of ours must not end the sender
                log.exception("webhook sender failed on %s", delivery.what)

    def deliver(self, d: Delivery) -> bool:
        """Try ``d`` until it lands, fails for good, or its tries are spent."""
        for attempt, delay in enumerate([*self._delays, None], start=1):
            try:
                status = post(d.url, d.body, self._key() if d.signed else None, self._timeout_s)
            except OSError as exc:
                reason = f"could not reach it ({exc})"
            else:
                if status < 300:
                    log.info("delivered %s (HTTP %d, try %d)", d.what, status, attempt)
                    return True
                if status < 500:
                    log.error("%s refused by its receiver (HTTP %d); not retried", d.what, status)
                    return False
                reason = f"its receiver answered HTTP {status}"
            if delay is None:
                log.error("%s not delivered after %d tries: %s", d.what, attempt, reason)
                return False
            log.warning("%s: %s; retrying in %.1fs", d.what, reason, delay)
            if self._stop.wait(delay):
                return False
        return False
