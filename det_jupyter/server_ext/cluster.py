"""Agents: the websocket agents connect to, and what the API shows of them."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from tornado import websocket

from det_agent import wire

from ..config.resources import WIRE_FITTING, WIRE_SCHEDULER
from ..errors import NotFound
from ..services.access.authz import Perm
from . import _serialize as ser
from ._api import BOOL, api, obj, string
from ._base import DetHandler, _bearer

log = logging.getLogger("det_jupyter.agents")

PING_INTERVAL_S = 10.0
PING_TIMEOUT_S = 10.0  # tornado caps the timeout at the interval


class _AgentRM(Protocol):
    """What a session needs of the agent resource manager (``rm.agents.AgentRM``)."""

    def hello(self, agent_id: str, hello: wire.Hello, send: Callable[[wire.MasterFrame], None]) -> str | None: ...

    def handle(self, agent_id: str, frame: wire.AgentFrame) -> None: ...

    def disconnected(self, agent_id: str) -> None: ...


class _Master(Protocol):
    @property
    def rm(self) -> _AgentRM: ...

    @property
    def master_id(self) -> str: ...

    @property
    def cluster_id(self) -> str: ...


class AgentSocket(websocket.WebSocketHandler):
    """``/agents?id=…`` — one per agent; authenticated by the agent token before the upgrade."""

    agent_token_only = True  # no user credential is ever accepted here

    @property
    def master(self) -> Any:
        return self.settings["det_master"]

    def check_xsrf_cookie(self) -> None:
        return None

    def check_origin(self, origin: str) -> bool:
        return False  # agents are not browsers; a browser page must never connect here

    # An agent that goes silent (stopped, or a cable pulled: no FIN ever comes) must lose its
    # connection, so that the reconnect wait starts; pings find it.
    @property
    def ping_interval(self) -> float:
        return PING_INTERVAL_S

    @property
    def ping_timeout(self) -> float:
        return PING_TIMEOUT_S

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
        self.session = AgentSession(self.master, self.agent_id, self._send_text,
                                    close=lambda why: self.close(4000, why[:120]))

    def _send_text(self, text: str) -> None:
        self.write_message(text)

    def on_message(self, message: str | bytes) -> None:
        self.session.on_message(message)

    def on_close(self) -> None:
        if hasattr(self, "session"):
            self.session.on_close()


class AgentSession:
    """One agent's frames, whatever carries them: its websocket, or the in-process link of
    the agent embedded in the master (``det_agent.LocalLink``).

    Every frame with an ``id`` is acknowledged (``{"type": "ack", "id": …}``) once handled —
    a log batch once stored — and the agent keeps it until then. A frame whose handling fails
    is not acknowledged: the session is closed instead, so the agent reconnects and sends it
    again (later frames of this session are ignored: acks are cumulative)."""

    def __init__(
        self, master: _Master, agent_id: str, send_text: Callable[[str], None],
        close: Callable[[str], None] | None = None,
    ) -> None:
        self.master = master
        self.agent_id = agent_id
        self._send_text = send_text
        self._close = close
        self._hello = False
        self._broken = False
        send_text(json.dumps(wire.Welcome(master.master_id, master.cluster_id).to_wire()))

    def _send(self, frame: wire.MasterFrame) -> None:
        try:
            self._send_text(json.dumps(frame.to_wire()))
        except websocket.WebSocketClosedError:
            log.warning("agent %s: lost a frame (%s) on a closed socket", self.agent_id, frame.TYPE)

    def on_message(self, message: str | bytes) -> None:
        try:
            msg = json.loads(message)
        except ValueError:
            return
        if not isinstance(msg, dict) or self._broken:
            return
        try:
            frame = wire.parse_agent_frame(msg)
        except ValueError as e:
            self._bad_frame(msg, e)
            return
        if isinstance(frame, wire.Hello):
            self._on_hello(frame)
        elif self._hello:
            frame_id = frame.id if isinstance(frame, (wire.TaskPulling, wire.TaskStarted, wire.Logs,
                                                      wire.TaskExited)) else None
            try:
                self.master.rm.handle(self.agent_id, frame)
            except Exception:
                log.exception("agent %s: failed to handle %s", self.agent_id, frame.TYPE)
                if frame_id is not None and self._close is not None:
                    self._broken = True
                    self._close("a frame could not be handled; send it again")
                    return
            if frame_id is not None:
                self._send(wire.Ack(frame_id))

    def _on_hello(self, hello: wire.Hello) -> None:
        refused = self.master.rm.hello(self.agent_id, hello, self._send)
        if refused:
            self._refuse(refused)
            return
        self._hello = True

    def _refuse(self, why: str) -> None:
        log.error("agent %s refused: %s", self.agent_id, why)
        self._send(wire.Refused(why))
        if self._close is not None:
            self._close(why)

    def _bad_frame(self, msg: dict[str, Any], error: ValueError) -> None:
        """A frame that is not the protocol's: a bad hello refuses the agent; another is
        dropped, and acknowledged where it has an id (sending it again would not help)."""
        if msg.get("type") == wire.Hello.TYPE:
            self._refuse(f"a bad hello frame: {error}")
            return
        log.warning("agent %s: dropping a frame: %s", self.agent_id, error)
        frame_id = msg.get("id")
        if self._hello and isinstance(frame_id, int):
            self._send(wire.Ack(frame_id))

    def on_close(self) -> None:
        if self._hello:
            self.master.rm.disconnected(self.agent_id)


def agent_json(a: dict[str, Any]) -> dict[str, Any]:
    """A ``v1Agent``: slots with their device, whether enabled, and what runs there; each slot
    also carries ``stats`` (GPU utilisation and memory) when the agent reports them."""
    off = set(a["disabled_slots"])
    slots = {}
    for s in a["slots"]:
        holder = next((k for k, v in a["used"].items() if s["id"] in v), None)
        slot: dict[str, Any] = {
            "id": str(s["id"]),
            "device": {"id": s["id"], "brand": s.get("name") or "", "uuid": s.get("uuid") or "",
                       "type": "TYPE_CUDA" if s.get("type") == "cuda" else "TYPE_CPU"},
            "enabled": s["id"] not in off and a["enabled"],
            "draining": a["draining"],
            "container": ({"id": holder, "state": "STATE_RUNNING", "devices": []}
                          if holder is not None else None),
        }
        if s["id"] in a["stats"]:
            slot["stats"] = a["stats"][s["id"]]
        slots[str(s["id"])] = slot
    types: dict[str, dict[str, int]] = {}
    brands: dict[str, dict[str, int]] = {}
    for slot in slots.values():
        for key, table in ((slot["device"]["type"], types), (slot["device"]["brand"] or "cpu", brands)):
            stat = table.setdefault(key, {"disabled": 0, "draining": 0, "total": 0})
            stat["total"] += 1
            stat["disabled"] += not slot["enabled"]
            stat["draining"] += bool(slot["draining"])
    return {
        "id": a["id"], "resourcePools": [a["resource_pool"]], "slots": slots,
        "addresses": [a["address"]], "enabled": a["enabled"], "draining": a["draining"],
        "registeredTime": ser.ts(a["registered_at"]), "numContainers": len(a["used"]),
        "version": a.get("version") or "", "slotStats": {"typeStats": types, "brandStats": brands},
    }


class AgentsHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        agents = [agent_json(a) for a in self.master.rm.describe()]
        self.send({"agents": agents, "pagination": ser.pagination(0, 0, len(agents), len(agents))})


class AgentHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self, agent_id: str) -> None:
        found = [a for a in self.master.rm.describe() if a["id"] == agent_id]
        if not found:
            raise NotFound(f"agent {agent_id} is not connected; det agent list shows the agents")
        self.send({"agent": agent_json(found[0])})


class AgentEnableHandler(DetHandler):
    """``POST /api/v1/agents/{id}/enable|disable`` (body ``{"drain": bool}`` for disable)."""

    permissions = {"POST": Perm.UPDATE_AGENTS}

    @api(body=obj(drain=BOOL, agentId=string()))
    def post(self, agent_id: str, verb: str) -> None:
        body = self.body_json()
        drain = bool(body.get("drain"))
        try:
            self.master.rm.set_enabled(agent_id, verb == "enable", drain=drain)
        except KeyError:
            raise NotFound(f"agent {agent_id} is not connected; det agent list shows the agents") from None
        found = [a for a in self.master.rm.describe() if a["id"] == agent_id]
        self.send({"agent": agent_json(found[0])})


class SlotEnableHandler(DetHandler):
    """``POST /api/v1/agents/{id}/slots/{slot}/enable|disable``."""

    permissions = {"POST": Perm.UPDATE_AGENTS}

    @api()
    def post(self, agent_id: str, slot_id: str, verb: str) -> None:
        try:
            self.master.rm.set_slot_enabled(agent_id, int(slot_id), verb == "enable")
        except (KeyError, ValueError):
            raise NotFound(f"agent {agent_id} has no slot {slot_id}; det slot list shows them") from None
        self.send({})


class TasksHandler(DetHandler):
    """``GET /api/v1/tasks``: every live allocation, where it runs (``det slot list``,
    ``det agent disable --drain``)."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        out = {}
        for alloc in self.master.allocations.live_allocations():
            devices: dict[str, Any] = {}
            for agent, slot_ids in (alloc.placement or [[alloc.agent_id, alloc.slot_ids or []]]):
                devices[agent] = {"devices": [{"id": i, "type": "TYPE_CPU"} for i in slot_ids]}
            out[alloc.allocation_id] = {
                "taskId": alloc.task_id, "allocationId": alloc.allocation_id,
                "name": alloc.task_id, "resourcePool": alloc.resource_pool,
                "priority": alloc.priority, "slotsNeeded": alloc.slots,
                "registeredTime": ser.ts(alloc.submitted_at),
                "resources": [{"allocationId": alloc.allocation_id, "containerId": alloc.allocation_id,
                               "agentDevices": devices, "resourcesId": alloc.allocation_id,
                               "resourcesType": "process"}],
            }
        self.send({"allocationIdToSummary": out})


class SchedulerStatsHandler(DetHandler):
    """``GET /api/v1/det-jupyter/scheduler-stats``: recent scheduling passes (BM-4, ops)."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        rm = self.master.rm
        self.send({"passes": rm.passes, "recentPasses": [
            {"ms": round(p.ms, 3), "pending": p.pending, "placed": p.placed,
             "snapshotMs": round(p.snapshot_ms, 3), "decideMs": round(p.decide_ms, 3),
             "applyMs": round(p.apply_ms, 3)}
            for p in rm.recent_passes
        ]})


class ResourcePoolsHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        resources = self.master.resources
        agents = self.master.rm.describe()
        pools: dict[str, dict] = {name: {"agents": 0, "slots": 0, "used": 0} for name in resources.pools}
        for a in agents:
            p = pools.get(a["resource_pool"])
            if p is None:
                continue
            p["agents"] += 1
            p["slots"] += len(a["slots"])
            p["used"] += sum(len(v) for v in a["used"].values())
        out = []
        for name, p in pools.items():
            sched = resources.pools[name].scheduler
            out.append({
                "name": name, "description": resources.pools[name].description,
                "type": "RESOURCE_POOL_TYPE_K8S" if resources.kubernetes is not None else "RESOURCE_POOL_TYPE_STATIC",
                "numAgents": p["agents"], "slotsAvailable": p["slots"], "slotsUsed": p["used"],
                "slotType": "TYPE_CPU", "defaultComputePool": name == resources.default_compute_pool,
                "defaultAuxPool": name == resources.default_aux_pool,
                "schedulerType": WIRE_SCHEDULER[sched.type],
                "schedulerFittingPolicy": WIRE_FITTING[sched.fitting_policy],
                "clusterName": "det-jupyter", "location": "local", "imageId": "", "instanceType": "",
                "masterUrl": self.master.settings.url, "masterCertName": "", "startupScript": "",
                "containerStartupScript": "", "agentDockerNetwork": "", "agentDockerRuntime": "",
                "agentDockerImage": "", "agentFluentImage": "", "maxIdleAgentPeriod": 0.0,
                "maxAgentStartingPeriod": 0.0, "minAgents": 0, "maxAgents": 0,
                "preemptible": sched.preemption,
                "auxContainerCapacity": 0, "auxContainersRunning": 0, "auxContainerCapacityPerAgent": 0,
                "details": {"priorityScheduler": {"preemption": sched.preemption,
                                                  "defaultPriority": sched.default_priority}}
                if sched.type == "priority" else {},
                "resourceManagerMetadata": {}, "accelerator": "",
            })
        self.send({"resourcePools": out, "pagination": ser.pagination(0, 0, len(out), len(out))})


class KubernetesResourceManagersHandler(DetHandler):
    """``GetKubernetesResourceManagers``: the cluster names of the master's Kubernetes resource
    managers (its ``cluster_name``, else ``default``); none with agents."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        k8s = self.master.resources.kubernetes
        self.send({"resourceManagers": [k8s.cluster_name or "default"] if k8s is not None else []})
