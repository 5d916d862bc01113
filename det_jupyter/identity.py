"""One identity for a Jupyter server and its kernels (standard library only).

When the master runs as a jupyter-server extension it writes, under the Jupyter runtime
directory, a file readable only by its user (mode 0600) holding the master's URL, a det user's
name and a session token for that user, and puts the file's *path* (not the token) in
``DET_JUPYTER_IDENTITY`` of its own environment, which every kernel it starts inherits. The
SDK's ``login()`` (and so ``%det``, the widgets) uses that identity when it is given no other
credentials, so code in the server's own notebooks needs no second login.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

IDENTITY_ENV = "DET_JUPYTER_IDENTITY"


@dataclass(frozen=True)
class Identity:
    master: str
    username: str
    token: str


def identity_path(runtime_dir: str | os.PathLike, pid: int | None = None) -> Path:
    """Where a server with process id ``pid`` keeps its identity file."""
    return Path(runtime_dir) / f"det-jupyter-identity-{pid or os.getpid()}.json"


def write_identity(path: str | os.PathLike, identity: Identity) -> Path:
    """Write the identity file atomically, mode 0600 from its creation (a leftover temporary
    file with looser modes is tightened before the token is written to it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"master": identity.master, "username": identity.username,
                   "token": identity.token}, fh)
    os.replace(tmp, path)
    return path


def load_identity(environ: dict[str, str] | None = None) -> Identity | None:
    """The identity named by ``DET_JUPYTER_IDENTITY``; ``None`` when it is unset, the file is
    gone (the server stopped) or it is not an identity file."""
    path = (environ if environ is not None else os.environ).get(IDENTITY_ENV)
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text())
        return Identity(str(data["master"]).rstrip("/"), str(data["username"]), str(data["token"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
