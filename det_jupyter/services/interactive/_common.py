"""Pure parts of interactive tasks (notebooks): their config, the command a notebook runs, the
proxy's tickets, and whether a notebook is idle. No I/O and no clock reads here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import shlex
from dataclasses import dataclass
from typing import Any

IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
TICKET_LIFETIME = 7 * 86400.0


def parse_duration(value: Any, key: str) -> float | None:
    """``idle_timeout``: seconds, or a Go-style duration ("20m", "1h", "30s"); None/"" is off."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a duration such as 20m or 30s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{key} must be a duration such as 20m, 1h or 30s, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{key} must be positive, got {value!r}")
    return seconds


@dataclass(frozen=True)
class NotebookSettings:
    """What a notebook's config says beyond a command's: idling and its working directory."""

    idle_timeout_s: float | None
    idle_type: str
    work_dir: str | None

    @classmethod
    def parse(cls, raw: dict[str, Any], default_timeout_s: float | None) -> NotebookSettings:
        timeout = parse_duration(raw.get("idle_timeout"), "idle_timeout")
        idle_type = raw.get("notebook_idle_type") or "kernels_or_terminals"
        if idle_type not in IDLE_TYPES:
            raise ValueError(f"notebook_idle_type must be one of {', '.join(IDLE_TYPES)}, "
                             f"got {idle_type!r}")
        work_dir = raw.get("work_dir")
        if work_dir is not None and (not isinstance(work_dir, str) or not work_dir.startswith("/")):
            raise ValueError(f"work_dir must be an absolute path, got {work_dir!r}")
        return cls(timeout if timeout is not None else default_timeout_s, idle_type, work_dir)


def notebook_entrypoint(task_id: str, bind: str, port: int, root_dir: str,
                        allow_root: bool) -> list[str]:
    """JupyterLab serving under the proxy's path, on ``bind:port``, in ``root_dir`` (made if
    missing). Its token comes from ``JUPYTER_TOKEN`` in the environment, not the command line.
    Nothing is installed at start and nothing is fetched: offline-safe."""
    lab = ["python3", "-m", "jupyterlab", "--no-browser",
           f"--ServerApp.ip={bind}", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--ServerApp.base_url=/proxy/{task_id}/",
           f"--ServerApp.root_dir={root_dir}",
           # Its own layouts, kept with the user's work (not the master's Lab's, whose
           # workspaces folder it would otherwise share on this machine).
           f"--LabApp.workspaces_dir={root_dir}/.jupyter/lab/workspaces",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if allow_root:
        lab.append("--ServerApp.allow_root=True")
    return ["sh", "-c", f"mkdir -p {shlex.quote(root_dir)} && exec {shlex.join(lab)}"]


# -- tickets: a notebook-scoped credential for browsers (the link `det notebook open` prints) --

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_ticket(secret: str, task_id: str, user_id: int, expires: float) -> str:
    """``<user>.<expiry>.<mac>``: good for ``task_id`` only, until ``expires``."""
    body = f"{user_id}.{int(expires)}"
    mac = hmac.new(secret.encode(), f"{task_id}|{body}".encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def check_ticket(secret: str, task_id: str, ticket: str, now: float) -> int | None:
    """The user id a ticket vouches for on ``task_id``; None if it is forged, expired or for
    another task."""
    parts = ticket.split(".")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    expected = make_ticket(secret, task_id, int(parts[0]), float(parts[1]))
    if not hmac.compare_digest(expected, ticket) or float(parts[1]) < now:
        return None
    return int(parts[0])


# -- idling ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Activity:
    """One look at a notebook server (its /api/kernels, /api/terminals, /api/sessions)."""

    kernels: int
    busy_kernels: int
    kernel_connections: int
    terminals: int
    sessions: int
    last_activity: float | None  # the server's own latest activity time (epoch seconds)


def is_active(idle_type: str, seen: Activity, previous: Activity | None, gpu_busy: bool) -> bool:
    """Whether the notebook did something since ``previous`` by ``idle_type``'s rule
    (Determined's: kernels_or_terminals: any kernel, terminal or session open;
    kernel_connections: any kernel with a connection; activity: the server's last activity
    moved). A busy kernel or a busy GPU of the task is always activity."""
    if seen.busy_kernels or gpu_busy:
        return True
    if idle_type == "kernels_or_terminals":
        return bool(seen.kernels or seen.terminals or seen.sessions)
    if idle_type == "kernel_connections":
        return seen.kernel_connections > 0
    if previous is None:
        return True  # the first look: nothing to compare with yet
    return seen.last_activity != previous.last_activity


_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,252}$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")


def with_reported_host(current: str, reported: str) -> str:
    """The proxy address ``current`` (``host:port``, the port the master gave the task) with
    the host the task reported for itself (``POST .../proxy_address``: 0.38.1's pods report
    their pod IP, without a port). A port in ``reported`` is ignored: the task listens on the
    master's. ValueError when ``reported`` is not a host name or IP address."""
    text = reported.strip()
    if text.startswith("["):  # [v6] or [v6]:port
        host, _, rest = text[1:].partition("]")
        v6 = True
    elif text.count(":") > 1:  # a bare IPv6 address
        host, rest, v6 = text, "", True
    else:
        host, colon, rest = text.partition(":")
        rest, v6 = colon + rest, False
    port_ok = rest == "" or (rest[:1] == ":" and rest[1:].isdigit())
    if not port_ok or not (_IPV6.match(host) if v6 else _HOST.match(host)):
        raise ValueError(f"proxyAddress must be a host name or IP address (a port is not needed), "
                         f"got {reported!r}")
    port = current.rpartition(":")[2] if ":" in current else ""
    if not port.isdigit():
        raise ValueError(f"the task's proxy address {current!r} has no port to keep")
    return f"[{host}]:{port}" if v6 else f"{host}:{port}"
