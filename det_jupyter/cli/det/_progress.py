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
