"""FakeMaster: a stdlib http.server that records the harness's requests (a named test double)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "tok-123"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    # time.monotonic() once the answer is decided, just before it is written: a client cannot
    # act on an answer before this (stamping after the write raced the client's next request)
    answered_at: float = 0.0


# A route handler gets the request and returns (status, body) or None for 200 {}.
Route = Callable[[Recorded], "tuple[int, Any] | None"]


@dataclass
class FakeMaster:
    """Records every request; ``routes`` maps a path prefix to a handler."""

    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def find(self, method: str, prefix: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]

    def wait_for(self, method: str, prefix: str, n: int = 1, timeout: float = 5.0) -> list[Recorded]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.find(method, prefix)
            if len(found) >= n:
                return found
            time.sleep(0.01)
        raise AssertionError(f"expected {n} x {method} {prefix}, got {self.find(method, prefix)}")

    def start(self) -> None:
        master = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                url = urllib.parse.urlsplit(self.path)
                rec = Recorded(self.command, url.path, urllib.parse.parse_qs(url.query),
                               dict(self.headers), json.loads(raw) if raw else None)
                with master.lock:
                    master.requests.append(rec)
                result = None
                # The longest matching prefix wins, so a test can override part of a route.
                for prefix, route in sorted(master.routes.items(), key=lambda kv: -len(kv[0])):
                    if url.path.startswith(prefix):
                        result = route(rec)
                        break
                status, body = result if result is not None else (200, {})
                data = json.dumps(body).encode()
                rec.answered_at = time.monotonic()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            do_GET = do_POST = do_PATCH = _handle

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def slow_preemption(rec: Recorded) -> tuple[int, Any]:
    """A long-poll that never fires: block a little so the watcher does not spin."""
    if rec.query.get("timeout_seconds", ["0"])[0] != "0":
        time.sleep(0.2)
    return 200, {"preempt": False}


def trial_env(master_url: str, ckpt_root: str, **extra: str) -> dict[str, str]:
    """The DET_* environment the master gives a trial."""
    config = {"searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 50}},
              "checkpoint_storage": {"type": "shared_fs", "host_path": "/nonexistent"},
              "data": {"url": "x"}}
    env = {
        "DET_MASTER": master_url, "DET_CLUSTER_ID": "c1", "DET_TASK_ID": "1.abc",
        "DET_ALLOCATION_ID": "1.abc.1", "DET_SESSION_TOKEN": TOKEN, "DET_USER": "determined",
        "DET_TASK_TYPE": "TRIAL", "DET_EXPERIMENT_ID": "1", "DET_TRIAL_ID": "3",
        "DET_TRIAL_RUN_ID": "2", "DET_TRIAL_SEED": "42", "DET_HPARAMS": json.dumps({"lr": 0.1}),
        "DET_EXPERIMENT_CONFIG": json.dumps(config), "DET_STEPS_COMPLETED": "0",
        "DET_SHARED_FS_HOST_PATH": ckpt_root, "DET_AGENT_ID": "a1", "DET_SLOT_IDS": "[0,1]",
    }
    env.update(extra)
    return env


class _QuietServer(ThreadingHTTPServer):
    """A client that hung up before its answer was written (a test's timeout, a killed
    client) is not an error worth a traceback on stderr, where tests read their own output."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]
