"""A one-line status for long waits: rewritten in place on a TTY, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import TextIO


class StatusLine:
    """``update(text)`` shows the latest status. On a terminal the line is redrawn in place;
    elsewhere (pipes, CI logs) a line is printed only when the text changes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = ""
        self._open = False

    def update(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text.ljust(len(self._last)))
            self._open = True
        elif text != self._last:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last = text

    def done(self) -> None:
        """End the in-place line, so what follows starts on a fresh line."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def bar(fraction: float | None, width: int = 20) -> str:
    done = int(round(max(0.0, min(1.0, fraction or 0.0)) * width))
    return "[" + "#" * done + "-" * (width - done) + "]"


class CopyProgress:
    """``on_progress(done, total)`` for a download: a bar with bytes on stderr, drawn only
    when the copy is large enough to take a while (``min_bytes``); off a terminal one line per
    tenth, so logs stay short."""

    def __init__(self, label: str, min_bytes: int = 4 << 20, stream: TextIO | None = None) -> None:
        self.label = label
        self.min_bytes = min_bytes
        self.status = StatusLine(stream)
        self._step = -1

    def __call__(self, done: int, total: int) -> None:
        if total < self.min_bytes:
            return
        fraction = done / total if total else 1.0
        step = int(fraction * (100 if self.status.tty else 10))
        if step == self._step:
            return
        self._step = step
        self.status.update(f"{self.label} {bar(fraction)} {fraction * 100:5.1f}% "
                           f"{_mib(done)}/{_mib(total)}")

    def done(self) -> None:
        self.status.done()


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f}MiB"
