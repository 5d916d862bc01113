"""The proxy's upstream client (``_upstream.Upstream``) against a real socket server that
answers with scripted bytes: each framing, keep-alive reuse, a pooled connection the server
closed, and answers it must refuse."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from det_jupyter.server_ext._upstream import IDLE_PER_ADDRESS, Upstream, UpstreamError

Script = Callable[[int, bytes], bytes | None]  # (connection number, request) -> answer, None: close


class _Server:
    """Reads requests (head and Content-Length body) and writes what ``script`` says; keeps
    every request it read, with the number of the connection it came on."""

    def __init__(self, script: Script, *, close_after: bool = False) -> None:
        self.script = script
        self.close_after = close_after  # close each connection after its first answer
        self.requests: list[tuple[int, bytes]] = []
        self.connections = 0
        self.address = ""

    async def __aenter__(self) -> _Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = self.connections
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append((number, request))
                answer = self.script(number, request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def _ok(body: bytes, *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(x + b"\r\n" for x in extra) + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _fetch(up: Upstream, address: str, method: str = "GET", body: bytes | None = None,
                 headers: list[tuple[str, str]] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    async with await up.request(address, method, "/proxy/t/x?a=1", headers or [("Accept", "*/*")],
                                body) as answer:
        data = b"".join([chunk async for chunk in answer.chunks()])
        return answer.status, answer.headers, data


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_a_length_framed_answer_and_the_connection_kept_alive() -> None:
    async def test() -> None:
        async with _Server(lambda n, req: _ok(b"hello", b"Set-Cookie: a=1", b"Set-Cookie: b=2")) as srv:
            up = Upstream()
            status, headers, body = await _fetch(up, srv.address, "POST", b'{"x": 1}',
                                                 [("Content-Type", "application/json")])
            assert (status, body) == (200, b"hello")
            assert [v for n, v in headers if n == "Set-Cookie"] == ["a=1", "b=2"]
            assert (await _fetch(up, srv.address))[2] == b"hello"
            up.close()
        first, second = srv.requests
        assert first[1] == (b"POST /proxy/t/x?a=1 HTTP/1.1\r\nHost: " + srv.address.encode() +
                            b"\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"x\": 1}")
        assert b"Content-Length" not in second[1]  # a GET without a body has none
        assert (first[0], second[0]) == (0, 0)  # one connection for both
    _run(test)


def test_a_chunked_answer_is_decoded_and_its_trailers_dropped() -> None:
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"4;ext=1\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\nX-Trailer: t\r\n\r\n")

    async def test() -> None:
        async with _Server(lambda n, req: answer) as srv:
            up = Upstream()
            for _ in range(2):
                assert (await _fetch(up, srv.address))[2] == b"one,two,three"
            up.close()
        assert [n for n, _ in srv.requests] == [0, 0]
    _run(test)


def test_an_answer_without_length_runs_to_the_close_and_is_not_pooled() -> None:
    async def test() -> None:
        def script(n: int, req: bytes) -> bytes | None:
            return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"z" * 300_000

        async with _Server(script) as srv:
            up = Upstream()

            async def fetch_then_close() -> bytes:
                async with await up.request(srv.address, "GET", "/a", [], None) as answer:
                    pieces = []
                    async for chunk in answer.chunks():
                        pieces.append(chunk)
                        if sum(map(len, pieces)) == 300_000:
                            break
                    return b"".join(pieces)

            assert len(await fetch_then_close()) == 300_000
            assert len(await fetch_then_close()) == 300_000
            up.close()
        assert [n for n, _ in srv.requests] == [0, 1]
    _run(test)


@pytest.mark.parametrize(("method", "status"), [("HEAD", 200), ("GET", 204), ("GET", 304)])
def test_answers_without_a_body(method: str, status: int) -> None:
    answer = b"HTTP/1.1 %d X\r\nContent-Length: 5\r\n\r\n" % status

    async def test() -> None:
        async with _Server(lambda n, req: answer) as srv:
            up = Upstream()
            for _ in range(2):
                got, headers, body = await _fetch(up, srv.address, method)
                assert (got, body, ("Content-Length", "5") in headers) == (status, b"", True)
            up.close()
        assert [n for n, _ in srv.requests] == [0, 0]
    _run(test)


def test_100_continue_is_skipped() -> None:
    async def test() -> None:
        async with _Server(lambda n, req: b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(b"done")) as srv:
            up = Upstream()
            assert (await _fetch(up, srv.address, "PUT", b"data"))[::2] == (200, b"done")
            up.close()
    _run(test)


def test_a_pooled_connection_the_server_closed_is_replaced_for_idempotent_requests() -> None:
    async def test() -> None:
        # Each connection answers its first request only, then closes on reading the next
        # without answering: what a client sees of a kept-alive connection its server dropped.
        def script(n: int, req: bytes) -> bytes | None:
            return _ok(b"ok") if [m for m, _ in srv.requests].count(n) == 1 else None

        async with _Server(script) as srv:
            up = Upstream()
            assert (await _fetch(up, srv.address))[2] == b"ok"
            assert (await _fetch(up, srv.address))[2] == b"ok"  # sent again, on a new connection
            with pytest.raises(UpstreamError, match="kept-alive"):
                await _fetch(up, srv.address, "POST", b"y")  # not sent again: it may have acted
            assert (await _fetch(up, srv.address, "POST", b"z"))[2] == b"ok"  # a new connection
            up.close()
        assert [(n, req.split(b" ")[0]) for n, req in srv.requests] == [
            (0, b"GET"), (0, b"GET"), (1, b"GET"), (1, b"POST"), (2, b"POST")]
    _run(test)


@pytest.mark.parametrize(("answer", "message"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "ended before its Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"s" * 70000,  # streamed
     "ended before its Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nabc", "ended inside a chunk"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY", "chunk without its CRLF"),
    (b"HTTP/1.1 OK\r\n\r\n", "bad status line"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "bad status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
    (b"HTTP/1.1 200 OK\r\nCont", "ended inside its head"),
    (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols"),
])
def test_malformed_answers_are_refused(answer: bytes, message: str) -> None:
    async def test() -> None:
        async with _Server(lambda n, req: answer, close_after=True) as srv:
            up = Upstream()
            with pytest.raises(UpstreamError, match=message):
                await _fetch(up, srv.address)
            up.close()
    _run(test)


def test_a_line_break_in_a_header_is_refused_before_anything_is_sent() -> None:
    async def test() -> None:
        async with _Server(lambda n, req: _ok(b"")) as srv:
            up = Upstream()
            for headers in ([("X-A", "1\r\nX-Injected: 2")], [("X-A\nB", "1")]):
                with pytest.raises(UpstreamError, match="line break"):
                    await _fetch(up, srv.address, headers=headers)
            up.close()
        assert srv.connections == 0
    _run(test)


def test_a_refused_connection_names_the_address() -> None:
    async def test() -> None:
        async with _Server(lambda n, req: None) as srv:
            address = srv.address
        with pytest.raises(UpstreamError, match=f"cannot connect to {address}"):
            await _fetch(Upstream(), address)
    _run(test)


def test_close_answers_are_not_pooled_and_the_pool_is_bounded() -> None:
    async def test() -> None:
        async with _Server(lambda n, req: _ok(b"a", b"Connection: close") if b"/close" in req
                           else _ok(b"b")) as srv:
            up = Upstream()
            async with await up.request(srv.address, "GET", "/close", [], None) as answer:
                assert b"".join([c async for c in answer.chunks()]) == b"a"
            answers = [await up.request(srv.address, "GET", "/many", [], None)
                       for _ in range(IDLE_PER_ADDRESS + 4)]  # as many connections at once
            for answer in answers:
                async with answer:
                    assert b"".join([c async for c in answer.chunks()]) == b"b"
            assert len(up._idle[srv.address]) == IDLE_PER_ADDRESS
            up.close()
        assert srv.connections == 1 + IDLE_PER_ADDRESS + 4
    _run(test)


def test_a_silent_server_times_out_and_an_endless_head_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from det_jupyter.server_ext import _upstream

    monkeypatch.setattr(_upstream, "READ_TIMEOUT", 0.2)

    async def test() -> None:
        async with _Server(lambda n, req: b"") as srv:  # reads the request, never answers
            with pytest.raises(UpstreamError, match="timed out"):
                await _fetch(Upstream(), srv.address)
        huge = b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * (_upstream.HEAD_LIMIT + 10) + b"\r\n\r\n"
        async with _Server(lambda n, req: huge, close_after=True) as srv:
            with pytest.raises(UpstreamError, match="head is over"):
                await _fetch(Upstream(), srv.address)
    _run(test)
