"""A loopback HTTP server that receives webhooks in tests, and an independent signature check."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """Records every POST; answers each with the next of ``statuses`` (the last one repeats)."""

    def __init__(self, statuses: tuple[int, ...] = (200,)) -> None:
        self.statuses = list(statuses)
        self.got: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.got.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                 body, time.monotonic()))
                    status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait(self, count: int, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.got) >= count:
                    return list(self.got)
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {count} webhook POSTs; got {self.got!r}")


def signing_key(data_dir: Path) -> str:
    return (data_dir / "webhook_signing_key").read_text().strip()


def assert_signed(key: str, r: Received) -> None:
    """Determined 0.38.1's scheme, computed here on its own: hex HMAC-SHA256 of
    ``"<timestamp>,<body>"`` keyed with the signing key's text."""
    ts = r.headers["x-determined-ai-signature-timestamp"]
    assert ts.isdigit() and abs(int(ts) - time.time()) < 600, ts
    expected = hmac.new(key.encode(), ts.encode() + b"," + r.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(r.headers["x-determined-ai-signature"], expected), r.headers
    assert r.headers["content-type"] == "application/json; charset=UTF-8"
