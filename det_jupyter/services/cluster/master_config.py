"""What ``GET /api/v1/master/config`` shows (``det master config show``): the settings the master
started with, without its secrets (the agent token, the initial password, a database
password) and without where its data dir is (no response names it: paths under it are shown
as ``$DATA_DIR/…``)."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: Settings never shown, whatever their value.
SECRET_KEYS = frozenset({"agent_token", "initial_password"})
#: How a path under the data dir is shown.
DATA_DIR = "$DATA_DIR"


def redact_url(url: str) -> str:
    """A URL with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def shown_config(settings: Any) -> dict[str, Any]:
    """``settings`` (a dataclass of the master's settings) as plain JSON values, secrets out,
    resource pools as master.yaml names them."""
    out: dict[str, Any] = {}
    data_dir = str(getattr(settings, "data_dir", "") or "").rstrip("/")
    for f in dataclasses.fields(settings):
        if f.name in SECRET_KEYS or f.name == "data_dir":
            continue
        value = getattr(settings, f.name)
        if f.name == "db_url" and isinstance(value, str):
            value = redact_url(value)
        elif f.name == "resources" and value is not None:
            value = {
                "default_compute_resource_pool": value.default_compute_pool,
                "default_aux_resource_pool": value.default_aux_pool,
                "resource_pools": [
                    {"pool_name": p.name, "description": p.description,
                     "scheduler": dataclasses.asdict(p.scheduler)}
                    for p in value.pools.values()
                ],
            }
        if isinstance(value, str) and data_dir and data_dir in value:
            value = value.replace(data_dir, DATA_DIR)
        out[f.name] = value
    return out
