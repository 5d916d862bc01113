"""The test harness's master: it starts again on another port when the one it was given is
taken before the master binds it (a CI flake: the port became another connection's local end)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests._master import MasterProcess


def test_a_master_whose_port_is_taken_starts_on_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        m = MasterProcess(tmp_path / "m", extra_args=["--no-agent"])
        m.port = taken.getsockname()[1]
        busy = m.port
        m.start()
        try:
            assert m.port != busy
            assert f"port {busy} is not available" in m.log()
            assert m.admin().get("/api/v1/me")["user"]["username"] == "admin"
        finally:
            m.stop()
