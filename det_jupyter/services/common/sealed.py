"""Secrets at rest: the master's private files, and the values it seals before they reach the
database.

What the master only compares (passwords, session and allocation tokens) is stored hashed. What
it must replay — a notebook's upstream token, which the proxy sends to the task, and a shell's
SSH private key, which its owner fetches again — is sealed instead: AES-256-GCM under a key kept
outside the database, in ``<data_dir>/secrets_key`` (0600). A copy of the database (a backup, a
PostgreSQL dump, a stolen ``det.db``) without that file yields none of them; the key survives
restarts, so running notebooks stay reachable and a shell's key stays fetchable after one.

Each value is bound to where it is kept (``context``, e.g. ``<task id>:proxy_token``): a sealed
value copied into another row does not open there. A value without the ``sealed1:`` prefix was
written before sealing existed and is read as it is.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "sealed1:"
_NONCE = 12


class SealedError(ValueError):
    """A sealed value that does not open: another key sealed it, or it was altered."""


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


class Sealer:
    """Seals and opens short strings with one 256-bit key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError(f"a sealing key is 32 bytes, got {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, value: str, context: str) -> str:
        """``value`` encrypted and authenticated, as ``sealed1:<base64>``, for ``context`` only."""
        nonce = os.urandom(_NONCE)
        body = nonce + self._aead.encrypt(nonce, value.encode(), context.encode())
        return PREFIX + base64.urlsafe_b64encode(body).decode().rstrip("=")

    def open(self, value: str, context: str) -> str:
        """The plain text of a value :meth:`seal` made for ``context``; a value that was never
        sealed (a row from before sealing) as it is."""
        if not is_sealed(value):
            return value
        text = value[len(PREFIX):]
        try:
            body = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            return self._aead.decrypt(body[:_NONCE], body[_NONCE:], context.encode()).decode()
        except (InvalidTag, ValueError) as exc:
            raise SealedError(f"{context}: sealed with another key or altered (was "
                              "<data_dir>/secrets_key replaced?)") from exc
