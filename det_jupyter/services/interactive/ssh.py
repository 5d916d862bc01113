"""Pure parts of shells (``det shell``): the per-shell key pair, what a shell's config keeps,
the command its task runs, and what of it a user may see. No I/O and no clock reads here.

A shell is a task running an SSH server (``det_jupyter.tasks.sshd``) on its allocated port,
reached only through the master's tunnel (``/det-jupyter/tunnel/{taskId}``). The master makes
an ed25519 key pair per shell at launch; the task accepts that public key and nothing else,
and the private key goes to the shell's owner alone (``privateKey`` of ``v1Shell``).
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ._common import parse_duration

#: The config keys that hold the key pair; never echoed in a ``config`` a response carries.
PRIVATE_KEY = "ssh_private_key"
PUBLIC_KEY = "ssh_public_key"
KEY_ENV = "DET_SHELL_AUTHORIZED_KEY"  # what the task's sshd reads (det_jupyter.tasks.sshd)


def generate_key_pair(comment: str = "") -> tuple[str, str]:
    """A fresh ed25519 key pair: (private key in OpenSSH PEM, public key as one OpenSSH line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, f"{public} {comment}".strip()


def shell_settings(raw: dict[str, Any], username: str, defaults: dict[str, Any],
                   keys: tuple[str, str] | None = None) -> dict[str, Any]:
    """What a shell keeps in its stored config: its idle_timeout (off unless set: Determined's
    shells are not culled by default) and its key pair (``keys``, or a fresh one)."""
    timeout = parse_duration(raw.get("idle_timeout"), "idle_timeout")
    if timeout is None:
        timeout = defaults.get("shell_timeout_s")
    private, public = keys or generate_key_pair(f"det-shell-{username}")
    return {"idle_timeout": timeout, PRIVATE_KEY: private, PUBLIC_KEY: public}


def shell_entrypoint(bind: str, port: int) -> list[str]:
    """The task's command: the SSH server on the allocated ``bind:port``; nothing installed."""
    return ["python3", "-m", "det_jupyter.tasks.sshd", "--host", bind, "--port", str(port)]


def shell_build(task_id: str, bind: str, port: int, cfg: dict[str, Any],
                allow_root: bool) -> tuple[list[str], dict[str, str]]:
    """The ``_kinds.Builder`` of shells: the public key only travels to the task."""
    return shell_entrypoint(bind, port), {KEY_ENV: cfg[PUBLIC_KEY]}


def public_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A shell's stored config without its private key (what a response's ``config`` shows)."""
    return {k: v for k, v in cfg.items() if k != PRIVATE_KEY}


def ssh_username(username: str) -> str:
    """The user name the printed ssh command uses (any is accepted; keys decide)."""
    return "".join(c for c in username if c.isalnum() or c in "._-") or "det"
