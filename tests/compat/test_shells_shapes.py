"""Shells as the stock client reads them: ``v1LaunchShellResponse``, ``v1GetShellResponse``,
``v1GetShellsResponse``, ``v1KillShellResponse``, and the stock ``det shell kill``. (The stock
``det shell list`` needs /api/v1/workspaces, not served yet; the stock ``det shell open``
tunnels without det credentials, which our tunnel refuses by design: use det_jupyter's.)"""

from __future__ import annotations

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


def test_shell_responses_have_the_stock_shapes(det_env, master: MasterProcess) -> None:
    client = master.admin()
    launched = client.post("/api/v1/shells", {"config": {"resources": {"slots": 0}}})
    det_env.check_shape("v1LaunchShellResponse", launched)
    shell_id = launched["shell"]["id"]
    assert launched["shell"]["privateKey"] and launched["shell"]["publicKey"]
    wait_for(lambda: client.get(f"/api/v1/shells/{shell_id}")["shell"]["state"] == "STATE_RUNNING",
             timeout=90, what="the shell running")
    det_env.check_shape("v1GetShellResponse", client.get(f"/api/v1/shells/{shell_id}"))
    det_env.check_shape("v1GetShellsResponse", client.get("/api/v1/shells"))
    killed = det_env.det(["shell", "kill", shell_id], master.url, **ADMIN)
    assert killed.returncode == 0, killed.stderr
    wait_for(lambda: client.get(f"/api/v1/shells/{shell_id}")["shell"]["state"] == "STATE_TERMINATED",
             timeout=30, what="the killed shell ended")
    det_env.check_shape("v1KillShellResponse", client.post(f"/api/v1/shells/{shell_id}/kill"))
