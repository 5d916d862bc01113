"""Agents: the websocket agents connect to, and what the API shows of them."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

from tornado import websocket

from ..scheduler import pool_of
from . import _serialize as ser
from ._base import DetHandler, _bearer

log = logging.getLogger("det_jupyter.agents")


class AgentSocket(websocket.WebSocketHandler):
    """``/agents?id=…`` — one per agent; authenticated by the agent token before the upgrade."""

    @property
    def master(self) -> Any:
        return self.settings["det_master"]

    def check_xsrf_cookie(self) -> None:
        return None

    def check_origin(self, origin: str) -> bool:
        return False  # agents are not browsers; a browser page must never connect here

    async def get(self, *args: Any, **kwargs: Any) -> None:
        token = _bearer(self.request.headers.get("Authorization")) or ""
        expected = self.settings["det_agent_token"]
        if not hmac.compare_digest(token.encode(), expected.encode()):
            self.set_status(401)
            self.finish({"message": "invalid agent token"})
            return
        self.agent_id = self.get_query_argument("id", "") or ""
        if not self.agent_id or len(self.agent_id) > 255:
            self.set_status(400)
            self.finish({"message": "id query parameter is required"})
            return
        if self.master.rm.is_connected(self.agent_id):
            self.set_status(409)
            self.finish({"message": f"agent {self.agent_id} is already connected"})
            return
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.session = AgentSession(self.master, self.agent_id, self._send_text)

    def _send_text(self, text: str) -> None:
        self.write_message(text)

    def on_message(self, message: str | bytes) -> None:
        self.session.on_message(message)

    def on_close(self) -> None:
        if hasattr(self, "session"):
            self.session.on_close()


class AgentSession:
    """One agent's frames, whatever carries them: its websocket, or the in-process link of
    the agent embedded in the master (``det_agent.LocalLink``)."""

    def __init__(self, master: Any, agent_id: str, send_text: Callable[[str], None]) -> None:
        self.master = master
        self.agent_id = agent_id
        self._send_text = send_text
        self._hello = False
        send_text(json.dumps({"type": "welcome", "master_id": master.master_id, "cluster_id": master.cluster_id}))

    def _send(self, msg: dict) -> None:
        try:
            self._send_text(json.dumps(msg))
        except websocket.WebSocketClosedError:
            log.warning("agent %s: lost a frame (%s) on a closed socket", self.agent_id, msg.get("type"))

    def on_message(self, message: str | bytes) -> None:
        try:
            msg = json.loads(message)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("type") == "hello":
            self._hello = True
            self.master.rm.hello(self.agent_id, msg, self._send)
        elif self._hello:
            try:
                self.master.rm.handle(self.agent_id, msg)
            except Exception:
                log.exception("agent %s: failed to handle %s", self.agent_id, msg.get("type"))

    def on_close(self) -> None:
        if self._hello:
            self.master.rm.disconnected(self.agent_id)


class AgentsHandler(DetHandler):
    def get(self) -> None:
        agents = []
        for a in self.master.rm.describe():
            slots = {
                str(s["id"]): {
                    "id": str(s["id"]),
                    "device": {"id": s["id"], "brand": s.get("name") or "", "uuid": s.get("uuid") or "",
                               "type": "TYPE_CUDA" if s.get("type") == "cuda" else "TYPE_CPU"},
                    "enabled": True,
                    "draining": False,
                    "container": ({"id": next(k for k, v in a["used"].items() if s["id"] in v),
                                   "state": "STATE_RUNNING", "devices": []}
                                  if any(s["id"] in v for v in a["used"].values()) else None),
                }
                for s in a["slots"]
            }
            types: dict[str, dict[str, int]] = {}
            brands: dict[str, dict[str, int]] = {}
            for s in slots.values():
                for key, table in ((s["device"]["type"], types), (s["device"]["brand"] or "cpu", brands)):
                    stat = table.setdefault(key, {"disabled": 0, "draining": 0, "total": 0})
                    stat["total"] += 1
            agents.append({
                "id": a["id"], "resourcePools": [pool_of(a["resource_pool"])], "slots": slots,
                "enabled": True, "draining": False, "registeredTime": ser.ts(a["registered_at"]),
                "numContainers": len(a["used"]), "version": a.get("version") or "",
                "slotStats": {"typeStats": types, "brandStats": brands},
            })
        self.send({"agents": agents, "pagination": ser.pagination(0, 0, len(agents), len(agents))})


class ResourcePoolsHandler(DetHandler):
    def get(self) -> None:
        agents = self.master.rm.describe()
        pools: dict[str, dict] = {}
        for a in agents:
            p = pools.setdefault(pool_of(a["resource_pool"]), {"agents": 0, "slots": 0, "used": 0})
            p["agents"] += 1
            p["slots"] += len(a["slots"])
            p["used"] += sum(len(v) for v in a["used"].values())
        pools.setdefault("default", {"agents": 0, "slots": 0, "used": 0})
        out = [{
            "name": name, "description": "", "type": "RESOURCE_POOL_TYPE_STATIC",
            "numAgents": p["agents"], "slotsAvailable": p["slots"], "slotsUsed": p["used"],
            "slotType": "TYPE_CPU", "defaultComputePool": name == "default", "defaultAuxPool": name == "default",
            "schedulerType": "SCHEDULER_TYPE_PRIORITY", "schedulerFittingPolicy": "FITTING_POLICY_BEST",
            "clusterName": "det-jupyter", "location": "local", "imageId": "", "instanceType": "",
            "masterUrl": self.master.settings.url, "masterCertName": "", "startupScript": "",
            "containerStartupScript": "", "agentDockerNetwork": "", "agentDockerRuntime": "",
            "agentDockerImage": "", "agentFluentImage": "", "maxIdleAgentPeriod": 0.0,
            "maxAgentStartingPeriod": 0.0, "minAgents": 0, "maxAgents": 0, "preemptible": False,
            "auxContainerCapacity": 0, "auxContainersRunning": 0, "auxContainerCapacityPerAgent": 0,
            "details": {}, "resourceManagerMetadata": {}, "accelerator": "",
        } for name, p in sorted(pools.items())]
        self.send({"resourcePools": out, "pagination": ser.pagination(0, 0, len(out), len(out))})
