"""HTTP to the master (standard library only), and the on-disk token cache."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._errors import MasterUnreachable, api_error

DEFAULT_MASTER = "http://127.0.0.1:8080"
AUTH_FILE = "auth.json"


def master_url(master: str | None = None) -> str:
    """The master's base URL: the argument, else ``DET_MASTER``, else the local default.
    ``host:port`` without a scheme gets ``http://``, as Determined's CLI does."""
    url = (master or os.environ.get("DET_MASTER") or DEFAULT_MASTER).strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


def _message(payload: bytes, fallback: str) -> str:
    try:
        body = json.loads(payload)
    except ValueError:
        text = payload.decode(errors="replace").strip()
        return text.splitlines()[0][:300] if text else fallback
    if isinstance(body, dict):
        for value in (body.get("message"), (body.get("error") or {}).get("message")
                      if isinstance(body.get("error"), dict) else body.get("error")):
            if isinstance(value, str) and value:
                return value
    return fallback


class Session:
    """One master URL and (optionally) a session token; JSON in, JSON out.

    Every failure becomes a ``DetClientError``: ``MasterUnreachable`` when nothing answers,
    an ``APIError`` subclass chosen by the HTTP status otherwise.
    """

    def __init__(self, master: str, token: str | None = None, *, timeout: float = 60) -> None:
        self.master = master_url(master)
        self.token = token
        self.timeout = timeout

    def _open(self, method: str, path: str, body: Any, params: dict[str, Any] | None,
              timeout: float | None, accept: str | None = None) -> Any:
        url = self.master + path
        if params:
            query = [(k, str(v)) for k, vs in params.items() if vs is not None
                     for v in (vs if isinstance(vs, (list, tuple)) else [vs])]
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if accept:
            req.add_header("Accept", accept)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            return urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            message = _message(exc.read(), f"{exc.reason}")
            raise api_error(exc.code, message, method=method, path=path) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MasterUnreachable(f"cannot reach the master at {self.master} ({reason}); "
                                    "is it running? set DET_MASTER or pass -m/--master") from None

    def request(self, method: str, path: str, body: Any = None, *,
                params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        """One JSON request; returns the decoded body (``{}`` when empty)."""
        with self._open(method, path, body, params, timeout or self.timeout) as resp:
            try:
                raw = resp.read()
            except OSError as exc:
                raise MasterUnreachable(f"the master at {self.master} stopped answering "
                                        f"({exc})") from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return [json.loads(line) for line in raw.splitlines() if line.strip()]

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, {} if body is None else body)

    def open_stream(self, path: str, *, accept: str, timeout: float | None = 3600) -> Any:
        """A GET whose body is read as it arrives (a file-like response; close it)."""
        return self._open("GET", path, None, None, timeout, accept)

    def stream(self, path: str, params: dict[str, Any] | None = None,
               timeout: float | None = 3600) -> Iterator[Any]:
        """An NDJSON stream (logs), one decoded ``result`` per line, as lines arrive."""
        resp = self._open("GET", path, None, params, timeout)
        with resp:
            try:
                for line in resp:
                    if line.strip():
                        obj = json.loads(line)
                        yield obj.get("result", obj) if isinstance(obj, dict) else obj
            except OSError as exc:
                raise MasterUnreachable(f"the log stream from {self.master} broke off "
                                        f"({exc})") from None


# -- the token cache --------------------------------------------------------------------

def config_dir() -> Path:
    """Where tokens are cached: ``DET_JUPYTER_CONFIG_DIR`` or ``~/.det-jupyter``."""
    return Path(os.environ.get("DET_JUPYTER_CONFIG_DIR") or Path.home() / ".det-jupyter")


class TokenStore:
    """``{master: {"active": user, "tokens": {user: token}}}`` in a 0600 JSON file, like the
    stock CLI's ``auth.json`` (a different file, so the two never fight over it)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_dir() / AUTH_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only home only loses the cache, never the session

    def active_user(self, master: str) -> str | None:
        return self._read().get(master, {}).get("active")

    def token(self, master: str, user: str) -> str | None:
        return self._read().get(master, {}).get("tokens", {}).get(user)

    def save(self, master: str, user: str, token: str) -> None:
        data = self._read()
        entry = data.setdefault(master, {})
        entry.setdefault("tokens", {})[user] = token
        entry["active"] = user
        self._write(data)

    def drop(self, master: str, user: str) -> None:
        data = self._read()
        entry = data.get(master, {})
        entry.get("tokens", {}).pop(user, None)
        if entry.get("active") == user:
            entry.pop("active", None)
        self._write(data)
