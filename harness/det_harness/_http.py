"""A small HTTP client for the master: keep-alive per thread, retries, Determined's errors.

``http.client`` rather than urllib so each thread (caller, shipper, preemption watcher) keeps
one persistent connection; the long-poll would otherwise block the shipper's connection.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from typing import Any

from ._errors import APIError

logger = logging.getLogger("det_harness")

RETRY_STATUSES = frozenset({502, 503, 504})


class TransientError(Exception):
    """The master could not be reached or answered 502/503/504; retrying may help."""


def backoff(attempt: int, base: float = 0.5, cap: float = 10.0) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based): exponential, capped."""
    return min(cap, base * (2**attempt))


def _error_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:500] or "(empty body)"
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return body["message"]
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("error") or err)
        if isinstance(err, str):
            return err
    return str(body)[:500]


class Session:
    """Requests to the master with the allocation token header of Determined's TaskSession."""

    def __init__(self, master_url: str, token: str, *, timeout: float = 30.0,
                 user_token: bool = False) -> None:
        parsed = urllib.parse.urlsplit(master_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"master URL {master_url!r} must look like http://host:port")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if user_token:  # a user's own token (core.track()), as the CLI sends it
            if token:
                self._headers["Authorization"] = f"Bearer {token}"
        else:
            self._headers["Grpc-Metadata-x-allocation-token"] = f"Bearer {token}"
        self._timeout = timeout
        self._local = threading.local()

    def _conn(self, timeout: float) -> Any:
        import http.client

        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close this thread's connection."""
        self._drop_conn()

    def request_once(
        self, method: str, path: str, body: Any = None, *, data: bytes | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One attempt. Raises TransientError (retry) or APIError (don't); returns parsed JSON."""
        if data is None and body is not None:
            data = json.dumps(body).encode()
        conn = self._conn(self._timeout if timeout is None else timeout)
        try:
            conn.request(method, self._prefix + path, body=data, headers=self._headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, ConnectionError, TimeoutError) as exc:
            self._drop_conn()
            raise TransientError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # http.client.HTTPException and friends
            self._drop_conn()
            raise TransientError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if resp.will_close:
            self._drop_conn()
        if resp.status in RETRY_STATUSES:
            raise TransientError(f"{method} {path}: HTTP {resp.status}")
        if resp.status >= 300:
            raise APIError(method, path, resp.status, _error_message(raw))
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None,
        retries: int = 8,
    ) -> Any:
        """Send with up to ``retries`` retries on connection errors and 502/503/504 (the
        default waits about 45 s in all: long enough for a master restart, which a task on
        Kubernetes outlives)."""
        attempt = 0
        while True:
            try:
                return self.request_once(method, path, body, timeout=timeout)
            except TransientError as exc:
                if attempt >= retries:
                    raise
                logger.debug("retrying after %s", exc)
                time.sleep(backoff(attempt))
                attempt += 1
