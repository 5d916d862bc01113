"""Process plumbing shared by the launchers: signals, parent-death, exit codes, free ports."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from types import FrameType

#: Signals a launcher passes on to its child (torchrun, or a worker's command).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)

#: Where each worker's wrapper writes its command's exit code (set by the torch launcher).
STATUS_DIR_ENV = "DET_LAUNCH_STATUS_DIR"


@contextlib.contextmanager
def forward_signals(proc: subprocess.Popen) -> Iterator[None]:
    """While inside, a FORWARDED signal to this process is sent on to ``proc``."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    old = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no-op elsewhere).

    So a worker never outlives the launcher that started it, even if that one is SIGKILLed.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before we asked
        os.kill(os.getpid(), sig)


def exit_code(returncode: int) -> int:
    """A shell-style exit status: a child killed by signal N gives 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for a one-container trial without a given port)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def write_status(status_dir: str, rank: int, code: int) -> None:
    """Record a worker's exit code as ``<status_dir>/<rank>`` (written atomically)."""
    path = pathlib.Path(status_dir)
    tmp = path / f".{rank}.tmp"
    tmp.write_text(str(code))
    os.replace(tmp, path / str(rank))


def first_failure(status_dir: str) -> int | None:
    """The exit code of the worker that failed first (earliest record, then lowest rank)."""
    failures = []
    for entry in pathlib.Path(status_dir).iterdir():
        if not entry.name.isdigit():
            continue
        try:
            code = int(entry.read_text())
        except (OSError, ValueError):
            continue
        if code != 0:
            failures.append((entry.stat().st_mtime_ns, int(entry.name), code))
    return min(failures)[2] if failures else None
