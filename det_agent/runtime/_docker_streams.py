"""The Docker runtime's streams, each read in a thread of its own: a blocking call that lasts
as long as a task (``in_thread``), a pull's progress (``progress_lines``), a container's
attach stream or replayed log (``log_frames``) fed to the task's log batcher (``pump``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._logs import LineSplitter, LogBatcher

log = logging.getLogger(__name__)


def first_line(e: BaseException) -> str:
    """An error's first line (at most 300 characters), for logs and task lines."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def in_thread(fn: Callable[[], Any], name: str) -> asyncio.Future[Any]:
    """Run a blocking call that may last as long as a task (a pull, a wait) in a thread of its
    own; the future resolves on the calling loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not done.done() and error is not None:
            done.set_exception(error)
        elif not done.done():
            done.set_result(result)

    def run() -> None:
        try:
            result, error = fn(), None
        except BaseException as e:  # handed to the awaiting coroutine
            result, error = None, e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def progress_lines(stream: Iterator[dict[str, Any]]) -> Iterator[str]:
    """The log lines of a pull's progress messages: each layer's status changes, not every
    byte count; raises DockerException on an error message."""
    import docker  # type: ignore[import-untyped]

    last: dict[str, str] = {}
    for msg in stream:
        if msg.get("error"):
            raise docker.errors.DockerException(str(msg["error"]))
        status = str(msg.get("status") or "")
        layer = str(msg.get("id") or "")
        if not status or last.get(layer) == status:
            continue
        last[layer] = status
        yield f"{layer}: {status}" if layer else status


def api_message(e: BaseException) -> str:
    return first_line(Exception(getattr(e, "explanation", None) or e))


def log_frames(api: Any, cid: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """A container's log from its first line, followed until it exits, as an attach stream
    with ``demux=True`` gives it: ``(stdout bytes, None)`` or ``(None, stderr bytes)``. (The
    engine's multiplexed frames: an 8-byte header, stream type and big-endian length, then
    the payload; docker's SDK only returns them merged.)"""
    res = api._get(api._url("/containers/{0}/logs", cid),
                   params={"stdout": 1, "stderr": 1, "follow": 1}, stream=True)
    api._raise_for_status(res)

    def frames() -> Iterator[tuple[bytes | None, bytes | None]]:
        try:
            while True:
                header = res.raw.read(8)
                if len(header) < 8:
                    return
                size = int.from_bytes(header[4:8], "big")
                data = res.raw.read(size) if size else b""
                yield (None, data) if header[0] == 2 else (data, None)
        finally:
            res.close()

    return frames()


def pump(stream: Any, loop: asyncio.AbstractEventLoop, batcher: LogBatcher) -> None:
    """Read a demuxed attach stream to its end (in a thread), handing lines to ``batcher`` on
    ``loop``."""
    splitters = {"stdout": LineSplitter(), "stderr": LineSplitter()}

    def hand(stdtype: str, lines: list[str]) -> None:
        if lines:
            loop.call_soon_threadsafe(batcher.add, stdtype, lines)

    try:
        for out, err in stream:
            if out:
                hand("stdout", splitters["stdout"].feed(out))
            if err:
                hand("stderr", splitters["stderr"].feed(err))
    except Exception as e:
        log.debug("log stream ended: %s", e)
    finally:
        for stdtype, splitter in splitters.items():
            hand(stdtype, splitter.finish())
        with contextlib.suppress(Exception):
            stream.close()
