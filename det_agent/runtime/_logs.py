"""Turning a task's stdout/stderr bytes into numbered, batched log lines."""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import threading
from collections.abc import Callable
from typing import IO

from ..wire import split_rank
from ._base import LogLine

#: Lines longer than this are shipped in pieces so one runaway line cannot exhaust memory.
MAX_LINE_BYTES = 1024 * 1024
#: A batch goes out when it holds this many lines ...
FLUSH_LINES = 1000
#: ... or when its oldest line has waited this long (seconds).
FLUSH_INTERVAL = 0.05



class LineSplitter:
    """Splits a byte stream into text lines ending in "\\n".

    A line ends at "\\n", "\\r\\n" or a lone "\\r" (progress bars redraw with "\\r", and each
    redraw should be its own line). Lines longer than ``max_bytes`` are cut into pieces, never
    inside a UTF-8 sequence. Bytes are decoded as UTF-8 with errors replaced.
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        if max_bytes < 4:
            raise ValueError(f"max_bytes must be at least 4, got {max_bytes}")
        self._max = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[str]:
        """Add bytes; return the lines they complete."""
        self._buf += data
        buf = self._buf
        n = len(buf)
        out: list[str] = []
        start = 0
        # Positions of the next "\n" / "\r" at or after start (n: none); each is searched for
        # again only once start passes it, so a buffer of many short lines is scanned once.
        nl = cr = -1
        while start < n:
            if nl < start:
                nl = buf.find(b"\n", start)
                nl = n if nl < 0 else nl
            if cr < start:
                cr = buf.find(b"\r", start)
                cr = n if cr < 0 else cr
            end = min(nl, cr)
            if end - start > self._max:
                end = n  # too long: cut a piece below
            if end == n:
                if n - start <= self._max:
                    break  # an unfinished line; wait for more bytes
                cut = self._cut_point(buf, start)
                out.append(self._decode(buf[start:cut]))
                start = cut
                continue
            width = 1
            if buf[end] == 0x0D:  # "\r"
                if end + 1 == n:
                    break  # could be the first half of "\r\n"; wait for more bytes
                if buf[end + 1] == 0x0A:
                    width = 2
            out.append(self._decode(buf[start:end]))
            start = end + width
        del buf[:start]
        return out

    def finish(self) -> list[str]:
        """Return what is left at end of stream as a last line (if anything)."""
        rest = bytes(self._buf)
        self._buf.clear()
        if rest.endswith(b"\r"):
            rest = rest[:-1]
            return [self._decode(rest)]
        return [self._decode(rest)] if rest else []

    def _cut_point(self, buf: bytearray, start: int) -> int:
        cut = start + self._max
        # Back up over UTF-8 continuation bytes (10xxxxxx) so a character is not split.
        for _ in range(3):
            if buf[cut] & 0xC0 != 0x80:
                break
            cut -= 1
        return cut

    @staticmethod
    def _decode(raw: bytes | bytearray) -> str:
        return bytes(raw).decode("utf-8", errors="replace") + "\n"


def utc_now() -> str:
    """The current time as ISO-8601 UTC."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class LogBatcher:
    """Numbers lines per allocation and hands them to ``emit`` in batches.

    A batch is flushed when it reaches ``FLUSH_LINES`` or ``FLUSH_INTERVAL`` after its first
    line, whichever comes first; ``close()`` flushes the rest.
    """

    def __init__(
        self,
        allocation_id: str,
        emit: Callable[[str, list[LogLine]], None],
        *,
        clock: Callable[[], str] = utc_now,
        first_seq: int = 0,
    ) -> None:
        self._allocation_id = allocation_id
        self._emit = emit
        self._clock = clock
        self._seq = first_seq
        self._pending: list[LogLine] = []
        self._timer: asyncio.TimerHandle | None = None

    @property
    def next_seq(self) -> int:
        """The seq the next line gets."""
        return self._seq

    def add(self, stdtype: str, texts: list[str]) -> None:
        """Stamp and queue lines read from ``stdtype``."""
        if not texts:
            return
        now = self._clock()
        for text in texts:
            rank, text = split_rank(text)
            self._pending.append(LogLine(self._seq, stdtype, text, now, rank))
            self._seq += 1
            if len(self._pending) >= FLUSH_LINES:
                self.flush()
        if self._pending and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_INTERVAL, self.flush)

    def flush(self) -> None:
        """Emit whatever is queued now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            batch, self._pending = self._pending, []
            self._emit(self._allocation_id, batch)

    close = flush


async def pump(stream: asyncio.StreamReader, stdtype: str, batcher: LogBatcher) -> None:
    """Read ``stream`` to EOF, feeding its lines to ``batcher``."""
    splitter = LineSplitter()
    while True:
        data = await stream.read(65536)
        if not data:
            break
        batcher.add(stdtype, splitter.feed(data))
    batcher.add(stdtype, splitter.finish())


async def pump_pipe(pipe: IO[bytes], stdtype: str, batcher: LogBatcher) -> None:
    """Read the pipe file ``pipe`` without blocking the loop; close it when done or cancelled."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe
    )
    try:
        await pump(reader, stdtype, batcher)
    finally:
        transport.close()


async def wait_process(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` to exit and return its returncode.

    asyncio's own subprocess ``wait()`` also waits for the pipes to close, which a background
    grandchild can hold open forever; a thread blocked in waitpid sees the exit alone. The
    thread is our own rather than the default executor's so long tasks do not starve it.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()

    def resolve(code: int) -> None:
        if not done.done():
            done.set_result(code)

    def waiter() -> None:
        code = proc.wait()
        try:
            loop.call_soon_threadsafe(resolve, code)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    threading.Thread(target=waiter, name=f"wait-{proc.pid}", daemon=True).start()
    return await done
