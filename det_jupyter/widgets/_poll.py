"""The widgets' live updates: one background thread per widget, throttled and deduplicated.

A ``Poller`` calls ``fetch()`` (REST calls through the SDK, in its own thread so the kernel
stays free) every ``interval`` seconds and hands the result to ``apply()`` only when it differs
from the last one, so an idle experiment sends the front end nothing. It stops when
``done(data)`` says so (a terminal experiment: after its last update), when ``stop()`` is
called (the widget was closed), after ``max_errors`` failures in a row, or after
``max_runtime`` seconds (a forgotten widget of a re-run cell must not poll forever).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from det_jupyter.client import DetClientError

T = TypeVar("T")


def fingerprint(data: Any) -> str:
    """A stable text of plain data, to tell whether anything changed."""
    return json.dumps(data, sort_keys=True, default=str)


class Poller(Generic[T]):
    """``fetch`` → (changed?) → ``apply``, every ``interval`` seconds, in a daemon thread.

    ``on_error(message)`` is told of every failed fetch (a one-line message) and
    ``on_error(None)`` once a fetch succeeds again; after ``max_errors`` failures in a row
    the poller gives up (the message says so).
    """

    def __init__(self, fetch: Callable[[], T], apply: Callable[[T], None], *,
                 interval: float = 1.5, done: Callable[[T], bool] | None = None,
                 on_error: Callable[[str | None], None] | None = None,
                 max_errors: int = 10, max_runtime: float = 3600.0) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.fetch = fetch
        self.apply = apply
        self.interval = interval
        self.done = done or (lambda _data: False)
        self.on_error = on_error or (lambda _msg: None)
        self.max_errors = max_errors
        self.max_runtime = max_runtime
        self.updates = 0  # how many times apply() ran (tests, diagnostics)
        self._last: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def poll_once(self) -> bool:
        """One fetch (and apply, if changed); returns whether polling should go on."""
        try:
            data = self.fetch()
        except DetClientError as exc:
            self._errors += 1
            if self._errors >= self.max_errors:
                self.on_error(f"{exc} — live updates stopped after {self._errors} failures")
                return False
            self.on_error(str(exc))
            return True
        if self._errors:
            self._errors = 0
            self.on_error(None)
        key = fingerprint(data)
        if key != self._last:
            self._last = key
            self.apply(data)
            self.updates += 1
        return not self.done(data)

    def start(self) -> Poller[T]:
        """Start polling in the background (the first poll after ``interval``)."""
        if self.running or self._stop.is_set():
            return self
        self._thread = threading.Thread(target=self._run, name="det-jupyter-widget-poll",
                                        daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_runtime
        while not self._stop.wait(self.interval):
            if time.monotonic() >= deadline:
                self.on_error(f"live updates stopped after {self.max_runtime / 60:.0f} min; "
                              "run the cell again to follow it")
                return
            try:
                if not self.poll_once():
                    return
            except Exception as exc:  # a bug in apply(): say it once and stop, never spin
                self.on_error(f"live updates stopped: {type(exc).__name__}: {exc}")
                return

    def stop(self) -> None:
        """Stop polling (idempotent); the thread ends within one interval."""
        self._stop.set()
