"""The master's access log (``server_ext.access_log``): a success's debug line is skipped where
no handler prints it, with its Prometheus metrics kept; failures and, at DEBUG, successes are
logged as Jupyter logs them. A real tornado server, Jupyter's own log function and metrics."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from jupyter_server.log import log_request
from jupyter_server.prometheus.metrics import HTTP_REQUEST_DURATION_SECONDS
from tornado import httpclient, httpserver, netutil, web

from det_jupyter.server_ext.access_log import without_unseen_successes

LOG = logging.getLogger("det-jupyter-test-access")


class _Handler(web.RequestHandler):
    @property
    def log(self) -> logging.Logger:  # as Jupyter's handlers have
        return LOG

    def get(self, what: str) -> None:
        if what == "missing":
            raise web.HTTPError(404)
        self.write({"ok": what})


class _Records(logging.Handler):
    """The logger's handler: what it printed, and (``made``, filled by the logger's filter,
    which sees each record before any handler's level) every record built."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.made: list[logging.LogRecord] = []
        self.printed: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.printed.append(record.getMessage())


def _served(level: int, paths: list[str]) -> _Records:
    """Serve ``paths`` with Jupyter's log function wrapped, the logger at DEBUG and its
    handler at ``level`` (as traitlets sets a Jupyter server up); what the log was handed."""
    records = _Records(level)
    LOG.handlers[:] = [records]
    LOG.filters[:] = [lambda record: records.made.append(record) or True]
    LOG.setLevel(logging.DEBUG)
    LOG.propagate = False
    log_function = without_unseen_successes(functools.partial(log_request, record_prometheus_metrics=True))

    async def main() -> None:
        sockets = netutil.bind_sockets(0, "127.0.0.1")
        server = httpserver.HTTPServer(web.Application([(r"/(\w+)", _Handler)], log_function=log_function))
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        try:
            for path in paths:
                await httpclient.AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/{path}", raise_error=False)
        finally:
            server.stop()

    asyncio.run(main())
    return records


def _count(status: int) -> float:
    labels = {"method": "GET", "handler": f"{__name__}._Handler", "status_code": str(status)}
    for metric in HTTP_REQUEST_DURATION_SECONDS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == labels:
                return sample.value
    return 0.0


def test_successes_nobody_sees_make_no_record_and_keep_their_metrics() -> None:
    before_ok, before_missing = _count(200), _count(404)
    records = _served(logging.INFO, ["a", "b", "missing"])
    # The two successes built no record; the failure was logged as Jupyter logs it.
    assert [r.levelno for r in records.made] == [logging.WARNING]
    assert len(records.printed) == 1 and records.printed[0].startswith("404 GET /missing")
    assert (_count(200) - before_ok, _count(404) - before_missing) == (2, 1)


def test_at_debug_every_request_is_logged() -> None:
    before = _count(200)
    records = _served(logging.DEBUG, ["a", "missing"])
    assert [m.split(" (")[0] for m in records.printed] == ["200 GET /a", "404 GET /missing"]
    assert _count(200) - before == 1


def test_another_log_function_is_left_as_it_is() -> None:
    def mine(handler: Any) -> None:
        pass

    assert without_unseen_successes(mine) is mine
    assert without_unseen_successes(None) is None
