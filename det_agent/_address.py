"""The address other containers reach this agent at, sent to the master in ``hello``.

The master hands it to distributed tasks as their rendezvous address, so it must be an address
on the network the agent shares with the master, not whatever the hostname resolves to (often
127.0.1.1 on Debian-style hosts). By default it is the local end of the route to the master.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import urllib.parse
from collections.abc import Callable

log = logging.getLogger(__name__)

#: What an agent on the master's own host reports.
LOOPBACK = "127.0.0.1"

#: ``probe(host, port) -> local address`` of the route to ``host``; raises OSError.
Probe = Callable[[str, int], str]

_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def validate_address(address: str) -> str:
    """Return ``address`` if it can be a host name or IP; raise ValueError naming it otherwise."""
    if not address or any(c.isspace() for c in address) or "/" in address:
        raise ValueError(
            f"agent address {address!r} must be a host name or IP address other hosts "
            "reach this agent at, e.g. 10.0.0.7"
        )
    return address


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (and ``*.localhost``) and loopback IP literals."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def master_host_port(master_url: str) -> tuple[str, int]:
    """The master's host and port from its ``http(s)://host[:port]`` URL."""
    parts = urllib.parse.urlsplit(master_url)
    default_port = _DEFAULT_PORTS.get(parts.scheme)
    if default_port is None or not parts.hostname:
        raise ValueError(
            f"master URL {master_url!r} must look like http://host:port or https://host:port"
        )
    try:
        port = parts.port or default_port
    except ValueError as e:  # a port that is not a number or out of range
        raise ValueError(f"master URL {master_url!r} has a bad port: {e}") from None
    return parts.hostname, port


def udp_local_address(host: str, port: int) -> str:
    """The local IP the kernel would send from to reach ``host:port``.

    Connecting a UDP socket only picks a route and a source address; no packet is sent, so
    this works even while the master is down (but needs ``host`` to resolve).
    """
    error: OSError = OSError(f"no address found for {host!r}")
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM):
        with socket.socket(family, kind, proto) as sock:
            try:
                sock.connect(sockaddr)
                return str(sock.getsockname()[0])
            except OSError as e:
                error = e
    raise error


def detect_address(master_url: str, *, probe: Probe = udp_local_address) -> str:
    """This agent's address as seen from the master at ``master_url``.

    ``127.0.0.1`` when the master is on loopback (no lookup at all); otherwise what ``probe``
    finds for the master's host and port. Raises OSError when the probe fails (host does not
    resolve, no route), ValueError for a malformed URL.
    """
    host, port = master_host_port(master_url)
    if is_loopback_host(host):
        return LOOPBACK
    return probe(host, port)
