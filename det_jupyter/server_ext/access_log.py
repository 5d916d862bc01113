"""The master's access log: Jupyter's own, without the work for lines nobody sees.

Jupyter logs each successful request at debug level, and its server logger is at DEBUG while
its handler prints from the server's ``log_level`` (INFO by default). So every API answer built
a log record, formatted it and had it dropped: about a twentieth of a small API request's time
in the master. ``without_unseen_successes`` skips that line where no handler would print it and
keeps everything else: the Prometheus request metrics of every request, every line of a
failure or a redirect, and every line at all where a handler prints debug.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any


def _printed(logger: logging.Logger, level: int) -> bool:
    """Whether a record of ``level`` on ``logger`` reaches a handler that prints it."""
    if not logger.isEnabledFor(level):
        return False
    node: logging.Logger | None = logger
    while node is not None:
        if any(level >= h.level for h in node.handlers):
            return True
        if not node.propagate:
            return False
        node = node.parent  # type: ignore[assignment]
    return logging.lastResort is not None and level >= logging.lastResort.level


def without_unseen_successes(log_function: Callable[[Any], None] | None) -> Callable[[Any], None] | None:
    """The web app's ``log_function`` where it is not Jupyter's own ``log_request``; else one
    that gives a success (2xx, 304) only its Prometheus metrics where its debug line would not
    be printed, and every other request to Jupyter's."""
    from jupyter_server.log import log_request

    if not (isinstance(log_function, functools.partial) and log_function.func is log_request
            and not log_function.args):
        return log_function
    from jupyter_server.prometheus.log_functions import prometheus_log_method

    metrics = log_function.keywords.get("record_prometheus_metrics", True)
    access = logging.getLogger("tornado.access")

    def log(handler: Any) -> None:
        status = handler.get_status()
        if (status < 300 or status == 304) and not _printed(getattr(handler, "log", access), logging.DEBUG):
            if metrics:
                prometheus_log_method(handler)
            return
        log_function(handler)

    return log
