"""det-agent as its own process: connects with the agent token, runs trials; impostors refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from tests._master import MasterProcess, start_agent, wait_experiment, wait_for
from tests.integration._exp import submit_counter, training_steps, trials

pytestmark = pytest.mark.slow


def _connect(url: str, token: str | None) -> int:
    """Try the agent websocket; the HTTP status of the refusal, or 101 if it upgraded."""

    async def attempt() -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            conn = await websocket_connect(HTTPRequest(url, headers=headers, connect_timeout=5))
        except HTTPClientError as exc:
            return exc.code
        conn.close()
        return 101

    return asyncio.run(attempt())


def test_standalone_agent_runs_trials(bare_master: MasterProcess, tmp_path: Path) -> None:
    token = (bare_master.data_dir / "agent_token").read_text().strip()
    client = bare_master.admin()
    exp_id = submit_counter(client, length=10)
    assert client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == "STATE_QUEUED"
    agent = start_agent(bare_master, tmp_path, "remote-1", token=token)
    try:
        wait_for(lambda: client.get("/api/v1/agents")["agents"], what="agent registration")
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
        assert training_steps(client, trials(client, exp_id)[0]["id"]) == list(range(1, 11))
        ws = bare_master.url.replace("http", "ws") + "/agents?id="
        assert _connect(ws + "rogue", "wrong-token") == 401
        assert _connect(ws + "rogue", None) == 401
        assert _connect(ws + "remote-1", token) == 409  # a live agent's id cannot be taken over
    finally:
        agent.terminate()
        agent.wait(timeout=20)
