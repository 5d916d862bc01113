"""The proxy's upstream client: HTTP/1.1 to a notebook's server over kept-alive connections.

The proxy forwards a request to one address the master recorded (a notebook's host:port) and
streams the answer back as it comes; it needs no redirects, cookies, proxies, TLS or
decompression. A general client (aiohttp) builds URL, request, response and timer objects for
each request, which cost about as much as the rest of a proxied request; this one writes the
request in one piece and reads the answer's head with one read. Kept-alive connections are
pooled by address, at most ``IDLE_PER_ADDRESS`` idle each.

Framing, as RFC 9112 §6 has it: no body for HEAD, 1xx, 204 and 304; a Transfer-Encoding ending
in ``chunked`` is decoded (the caller frames the body again); any other Transfer-Encoding, or
neither that nor a Content-Length, runs to the end of the connection; otherwise the
Content-Length. A pooled connection the server has closed meanwhile fails before any byte of
an answer: an idempotent request is then sent once more on a new connection. Every failure is
an ``UpstreamError`` (an ``OSError``), whether refused, cut off, malformed or too slow.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Iterable

CONNECT_TIMEOUT = 10.0  # seconds to connect
READ_TIMEOUT = 300.0  # seconds between two reads of an answer
HEAD_LIMIT = 256 * 1024  # bytes of an answer's status line and headers
PIECE = 256 * 1024  # bytes handed on at a time
SMALL = 64 * 1024  # bytes of a body of known length read with the head, in one piece
IDLE_PER_ADDRESS = 16
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class UpstreamError(OSError):
    """The notebook's server gave no well-formed answer in time."""


class _Stale(Exception):
    """A pooled connection closed before any byte of the answer (sending again is safe)."""


class Answer:
    """An answer whose head was read: ``status``, ``reason``, ``headers`` (name, value pairs as
    sent, repeated names repeated), ``body`` (the whole body, where its head gave a length of
    at most ``SMALL``: read with the head; else None) and the body as ``chunks()``. Use it as
    an ``async with``: leaving before the body was read closes the connection instead of
    pooling it."""

    def __init__(self, pool: Upstream, address: str, conn: _Conn, status: int, reason: str,
                 headers: list[tuple[str, str]], framing: str, length: int, reusable: bool,
                 body: bytes | None) -> None:
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self._pool, self._address, self._conn = pool, address, conn
        self._framing, self._length, self._reusable = framing, length, reusable
        self._done = framing == "none" or body is not None

    async def __aenter__(self) -> Answer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, decoded from its framing, in pieces of at most ``PIECE`` bytes."""
        reader = self._conn[0]
        if self.body is not None:
            if self.body:
                yield self.body
        elif self._framing == "length":
            async for data in _exactly(reader, self._length, "before its Content-Length"):
                yield data
        elif self._framing == "chunked":
            while True:
                line = await _read(reader.readuntil(b"\r\n"))
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise UpstreamError(f"the notebook sent a bad chunk size {line[:40]!r}") from None
                if size == 0:
                    while await _read(reader.readuntil(b"\r\n")) != b"\r\n":
                        pass  # trailers: not passed on
                    break
                async for data in _exactly(reader, size, "inside a chunk"):
                    yield data
                if await _read(reader.readexactly(2)) != b"\r\n":
                    raise UpstreamError("the notebook sent a chunk without its CRLF")
        elif self._framing == "close":
            while data := await _read(reader.read(PIECE)):
                yield data
        self._done = True

    def _release(self) -> None:
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            if self._done and self._reusable:
                self._pool.put(self._address, conn)
            else:
                conn[1].close()


class Upstream:
    """Kept-alive connections to notebooks' servers, by address; one per event loop."""

    def __init__(self) -> None:
        self._idle: dict[str, list[_Conn]] = {}

    async def request(self, address: str, method: str, target: str,
                      headers: Iterable[tuple[str, str]], body: bytes | None) -> Answer:
        """Send ``method target`` (the path and query, as sent to the proxy) to ``address``
        (host:port) with ``headers`` (a Host header is added) and ``body`` (None: no body,
        no Content-Length); the answer once its head arrived."""
        message = _message(method, target, address, headers, body)
        conn = self._take(address)
        if conn is not None:
            try:
                return await self._exchange(address, conn, message, method)
            except _Stale:
                if method not in _IDEMPOTENT:
                    raise UpstreamError("the notebook closed a kept-alive connection") from None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                host, _, port = address.rpartition(":")
                conn = await asyncio.open_connection(host.strip("[]"), int(port), limit=HEAD_LIMIT)
        except (OSError, ValueError) as exc:  # TimeoutError is an OSError
            raise UpstreamError(f"cannot connect to {address}: {str(exc) or 'timed out'}") from None
        try:
            return await self._exchange(address, conn, message, method)
        except _Stale:
            raise UpstreamError("the notebook closed the connection without answering") from None

    def put(self, address: str, conn: _Conn) -> None:
        idle = self._idle.setdefault(address, [])
        if len(idle) < IDLE_PER_ADDRESS and not conn[0].at_eof() and not conn[1].is_closing():
            idle.append(conn)
        else:
            conn[1].close()

    def close(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for _, writer in conns:
                writer.close()

    def _take(self, address: str) -> _Conn | None:
        idle = self._idle.get(address)
        while idle:
            conn = idle.pop()
            if not conn[0].at_eof() and not conn[1].is_closing():
                return conn
            conn[1].close()
        return None

    async def _exchange(self, address: str, conn: _Conn, message: bytes, method: str) -> Answer:
        reader, writer = conn
        try:
            writer.write(message)
            await writer.drain()
            async with asyncio.timeout(READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
                status, reason, headers, version = _parse_head(head)
                while 100 <= status < 200 and status != 101:  # 100 Continue and the like
                    head = await reader.readuntil(b"\r\n\r\n")
                    status, reason, headers, version = _parse_head(head)
                if status == 101:
                    raise UpstreamError("the notebook switched protocols unasked")
                framing, length = _framing(method, status, headers)
                body = None
                if framing == "length" and length <= SMALL:  # sent whole: read it now
                    try:
                        body = await reader.readexactly(length)
                    except asyncio.IncompleteReadError:
                        raise UpstreamError("the notebook's answer ended before its Content-Length") from None
        except asyncio.IncompleteReadError as exc:
            writer.close()
            if not exc.partial:
                raise _Stale() from None
            raise UpstreamError("the notebook's answer ended inside its head") from None
        except (ConnectionResetError, BrokenPipeError):
            writer.close()
            raise _Stale() from None
        except asyncio.LimitOverrunError:
            writer.close()
            raise UpstreamError(f"the notebook's answer head is over {HEAD_LIMIT} bytes") from None
        except UpstreamError:
            writer.close()
            raise
        except OSError as exc:  # TimeoutError is one
            writer.close()
            raise UpstreamError(f"no answer from {address}: {str(exc) or 'timed out'}") from None
        tokens = ",".join(v for n, v in headers if n.lower() == "connection").lower()
        reusable = version == "HTTP/1.1" and "close" not in tokens and framing != "close"
        return Answer(self, address, conn, status, reason, headers, framing, length, reusable, body)


async def _exactly(reader: asyncio.StreamReader, size: int, where: str) -> AsyncIterator[bytes]:
    """The next ``size`` bytes, in pieces of at most ``PIECE``; the answer ended ``where``
    (an UpstreamError) if the connection ends first."""
    while size:
        data = await _read(reader.read(min(size, PIECE)))
        if not data:
            raise UpstreamError(f"the notebook's answer ended {where}")
        size -= len(data)
        yield data


async def _read(awaitable: Awaitable[bytes]) -> bytes:
    """One read of an answer's body, bounded by ``READ_TIMEOUT``; failures as UpstreamError."""
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            return await awaitable
    except asyncio.IncompleteReadError:
        raise UpstreamError("the notebook's answer ended early") from None
    except asyncio.LimitOverrunError:
        raise UpstreamError("the notebook sent a chunk-size line that never ends") from None
    except OSError as exc:
        raise UpstreamError(f"reading the notebook's answer failed: {str(exc) or 'timed out'}") from None


def _message(method: str, target: str, address: str, headers: Iterable[tuple[str, str]],
             body: bytes | None) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {address}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    text = "\r\n".join(lines)
    if text.count("\r") != len(lines) - 1 or text.count("\n") != len(lines) - 1:
        raise UpstreamError("a header or the path holds a line break")
    try:
        return text.encode("latin-1") + b"\r\n\r\n" + (body or b"")
    except UnicodeEncodeError:
        raise UpstreamError("a header or the path is not latin-1 text") from None


def _parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]], str]:
    """(status, reason, headers, version) of an answer's head (its bytes up to CRLF CRLF)."""
    lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise UpstreamError(f"the notebook sent a bad status line {lines[0][:80]!r}")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:  # an obsolete folded line continues the last
            headers[-1] = (headers[-1][0], f"{headers[-1][1]} {line.strip()}")
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise UpstreamError(f"the notebook sent a bad header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return int(code), reason, headers, version


def _framing(method: str, status: int, headers: list[tuple[str, str]]) -> tuple[str, int]:
    """How the body is delimited: ("none"|"length"|"chunked"|"close", Content-Length)."""
    if method == "HEAD" or status < 200 or status in (204, 304):
        return "none", 0
    codings = [v.strip().lower() for n, value in headers if n.lower() == "transfer-encoding"
               for v in value.split(",") if v.strip()]
    if codings:
        return ("chunked", 0) if codings[-1] == "chunked" else ("close", 0)
    lengths = {v.strip() for n, value in headers if n.lower() == "content-length"
               for v in value.split(",")}
    if not lengths:
        return "close", 0
    if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
        raise UpstreamError(f"the notebook sent a bad Content-Length {sorted(lengths)}")
    length = int(lengths.pop())
    return ("length", length) if length else ("none", 0)
