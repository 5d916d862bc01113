"""Run the stock ``determined==0.38.1`` client (``.venv-det``) as a user would, in a sandbox.

Every call gets a private HOME (so the client's token cache is its own), no inherited ``DET_*``
variable but ``DET_MASTER``/``DET_USER``/``DET_PASS``, no terminal (``getpass`` then reads the
password from stdin) and its own process group, so a timeout also ends what it started (ssh,
the tunnel).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outcome:
    """What one run of the stock client did."""

    rc: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


class StockClient:
    """The stock ``det`` and ``python`` of ``venv``, logged in to ``master`` as ``user``."""

    def __init__(self, venv: Path, home: Path, master: str, user: str, password: str) -> None:
        self.venv = venv
        self.home = home
        self.master = master
        self.user = user
        self.password = password
        home.mkdir(parents=True, exist_ok=True)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        env.pop("PYTHONPATH", None)
        env.pop("DISPLAY", None)  # `open` commands must not reach a real browser
        env.pop("WAYLAND_DISPLAY", None)
        env.update(
            HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_CACHE_HOME=str(self.home / ".cache"), XDG_DATA_HOME=str(self.home / ".local"),
            BROWSER="true", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
            DET_MASTER=self.master, DET_USER=self.user, DET_PASS=self.password,
        )
        return env

    def det(self, argv: list[str], *, stdin: str | None = None, timeout: float = 60) -> Outcome:
        return self._run([str(self.venv / "bin" / "det"), *argv], stdin, timeout)

    def run_python(self, argv: list[str], *, timeout: float) -> Outcome:
        return self._run([str(self.python), *argv], None, timeout)

    def _run(self, argv: list[str], stdin: str | None, timeout: float) -> Outcome:
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env(),
            cwd=self.home, start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        _kill_group(proc.pid)  # what it left behind (a tunnel, an ssh) goes too
        return Outcome(proc.returncode, out, err, time.monotonic() - start, timed_out)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
