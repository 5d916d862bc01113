"""Where the proxy listens: an origin of its own, apart from the master's (reliability P4).

A notebook's or TensorBoard's pages are user-authored HTML and script. Served on the master's
origin, that script could call the master's Jupyter API with the browser's cookies. Served on
another origin (the same host, another port: ``DetJupyterApp.proxy_port``) it cannot: the
browser's same-origin policy keeps its script from reading the master's answers, and the
master refuses requests that carry a foreign ``Origin`` and sends no CORS headers.

Links name the proxy by the hostname the client used to reach the master (``localhost`` stays
``localhost``, a LAN name stays that name), with only the port swapped, so the cookie the proxy
sets lands where the browser will look for it. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")
_WILDCARD = {"", "0.0.0.0", "::", "*"}


def request_hostname(host_header: str | None) -> str | None:
    """The hostname of a ``Host`` header, lower-cased (an IPv6 literal in brackets), or None
    when the header is missing or is anything but a bare ``hostname[:port]``: a user-info part
    (``a@b``), a path, a scheme, a second colon or an empty label are refused, so nothing but
    a hostname from the request can ever reach a ``Location``."""
    if not host_header or len(host_header) > 300:
        return None
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        literal, rest = value[1:end], value[end + 1:]
        if end < 0 or "%" in literal:
            return None
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return None
        host = f"[{literal}]"
    else:
        host, sep, port = value.partition(":")
        rest = sep + port
        if len(host) > 253 or not all(_LABEL.match(label) for label in host.split(".")):
            return None
    if rest and not (rest.startswith(":") and _PORT.match(rest[1:]) and int(rest[1:]) <= 65535):
        return None
    return host


def default_hostname(ip: str) -> str:
    """The hostname links name when a request gives none: the address the server listens
    on, or 127.0.0.1 when it listens on every interface."""
    if ip in _WILDCARD:
        return "127.0.0.1"
    if ":" in ip and not ip.startswith("["):
        return f"[{ip}]"
    return ip


@dataclass(frozen=True)
class ProxyOrigin:
    """The proxy's listening origin: ``scheme://<hostname>:port``."""

    scheme: str  # http, or https when the server has TLS
    host: str  # the hostname named when a request gives none (default_hostname)
    port: int

    def url(self, host_header: str | None = None) -> str:
        """``scheme://host:port``: the request's own hostname (``Host`` header) with this
        port, or ``host`` when the header is missing or malformed."""
        return f"{self.scheme}://{request_hostname(host_header) or self.host}:{self.port}"

    def task_url(self, task_id: str, host_header: str | None = None) -> str:
        """Where a task's pages are: ``<origin>/proxy/<task id>/``."""
        return f"{self.url(host_header)}/proxy/{quote(task_id, safe='')}/"
