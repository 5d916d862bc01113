"""Task-facing routes: context, logs, allocations' signals, checkpoints."""

from __future__ import annotations

from ..config import tgz_to_b64
from ..errors import InvalidRequest, NotFound
from ..services.auth import AllocationPrincipal
from ..services.authz import Perm
from . import _models
from . import _serialize as ser
from ._base import DetHandler

MAX_LONG_POLL_S = 600.0


def _experiment_of_task(task_id: str) -> int:
    head = task_id.split(".", 1)[0]
    if not head.isdigit():
        raise NotFound(f"task {task_id} not found")
    return int(head)


def authorize_task(handler: DetHandler, task_id: str) -> None:
    """A trial's task needs the verb's experiment permission; an interactive task the matching
    NSC one (VIEW_NSC to read, UPDATE_NSC to act)."""
    is_trial = task_id.split(".", 1)[0].isdigit()
    perm = handler.perm
    if not is_trial:
        perm = Perm.UPDATE_NSC if perm in (Perm.UPDATE_EXPERIMENT,) else Perm.VIEW_NSC
    handler.authorize_task(task_id, perm)


def authorize_allocation(handler: DetHandler, allocation_id: str) -> None:
    p = handler.principal
    if isinstance(p, AllocationPrincipal) and p.allocation_id == allocation_id:
        task_id = p.task_id  # a task asking about its own allocation: its task is known
    else:
        try:
            task_id = handler.master.allocations.get(allocation_id).task_id
        except Exception:  # noqa: BLE001 - any lookup failure hides the allocation
            raise NotFound(f"allocation {allocation_id} not found") from None
    authorize_task(handler, task_id)


class TaskContextHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    def get(self, task_id: str) -> None:
        self.require_task(task_id)
        authorize_task(self, task_id)
        if task_id.startswith("cmd-"):
            self.master.commands.get(task_id)
            tgz = self.master.commands.context_tgz(task_id) or b""
            self.send({"b64Tgz": tgz_to_b64(tgz) if tgz else ""})
            return
        exp_id = _experiment_of_task(task_id)
        self.send({"b64Tgz": tgz_to_b64(self.master.experiments.context_tgz(exp_id))})


class TaskLogsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}
    allow_task = True

    async def get(self, task_id: str) -> None:
        self.require_task(task_id)
        authorize_task(self, task_id)
        self.set_header("Content-Type", "application/x-ndjson")
        follow = self.bool_arg("follow")
        limit = self.int_arg("limit", 0) or 0
        logs = self.master.logs
        rows = logs.query(task_id=task_id, limit=limit,
                          descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC")
        last = max((r.id for r in rows), default=0)
        for r in rows:
            self.write(ser.ndjson(ser.task_log(r)))
        await self.flush()
        idle = 0
        while follow and not self.request.connection.stream.closed() and idle < 3600:
            rows = logs.query(task_id=task_id, after_id=last)
            for r in rows:
                self.write(ser.ndjson(ser.task_log(r)))
                last = r.id
            if rows:
                idle = 0
                await self.flush()
            elif not self.master.allocations.task_active(task_id):
                break  # it ended and every line it wrote was sent
            else:
                idle += 1
                await logs.wait_for_more(1.0)
        self.finish()


class PostTaskLogsHandler(DetHandler):
    # The stock harness ships up to 1,000 lines a request, and a line (a progress bar redrawn
    # with \r) can be long; what a task printed is kept even where it is not valid text.
    max_body = 64 * 1024 * 1024
    body_strings = "scrub"
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    async def post(self) -> None:
        logs = (await self.body_json_async()).get("logs")
        if not isinstance(logs, list):
            raise InvalidRequest("logs must be a list")
        p = self.principal
        if isinstance(p, AllocationPrincipal):
            self.mark_checked()  # a task's own logs
            self.master.logs.append_shipped(p.task_id, p.allocation_id, p.trial_id, logs)
        else:
            entries = [e for e in logs if isinstance(e, dict) and isinstance(e.get("taskId"), str)]
            for task_id in sorted({e["taskId"] for e in entries}):
                authorize_task(self, task_id)  # all checked before any is written
            self.mark_checked()
            for entry in entries:
                self.master.logs.append_shipped(entry["taskId"], entry.get("allocationId"), None, [entry])
        self.send({})


class PreemptionSignalHandler(DetHandler):
    """The long-poll: blocks up to ``timeout_seconds`` until the task is asked to stop."""

    permissions = {"GET": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    async def get(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        authorize_allocation(self, allocation_id)
        raw = self.get_query_argument("timeout_seconds", None) or self.get_query_argument("timeoutSeconds", "0")
        try:
            timeout = max(0.0, min(float(raw), MAX_LONG_POLL_S))
        except ValueError:
            raise InvalidRequest("timeout_seconds must be a number") from None
        preempt = await self.master.allocations.wait_preemption(allocation_id, timeout)
        if not self.request.connection.stream.closed():
            self.send({"preempt": preempt})


class AckPreemptionHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    def post(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        authorize_allocation(self, allocation_id)
        self.master.allocations.ack_preemption(allocation_id)
        self.send({})


class AllocationNoopHandler(DetHandler):
    """ready / waiting / acceleratorData / proxy_address: accepted, nothing to do yet."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    def post(self, allocation_id: str, _what: str) -> None:
        self.require_allocation(allocation_id)
        authorize_allocation(self, allocation_id)
        self.send({})


class RendezvousHandler(DetHandler):
    permissions = {"GET": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    def get(self, allocation_id: str, resources_id: str) -> None:
        """Every container's address and slots, and the rank of the one asking
        (``DET_RESOURCES_ID`` is ``<allocation>.r<rank>``)."""
        self.require_allocation(allocation_id)
        authorize_allocation(self, allocation_id)
        alloc = self.master.allocations.get(allocation_id)
        placement = alloc.placement or [[alloc.agent_id, alloc.slot_ids or []]]
        agents = self.master.rm.agents
        addresses = [agents[a].address if a in agents else "127.0.0.1" for a, _ in placement]
        _, _, rank = resources_id.rpartition(".r")
        self.send({"rendezvousInfo": {
            "addresses": addresses, "rank": int(rank) if rank.isdigit() else 0,
            "slots": [len(ids) for _, ids in placement],
        }})


class AllGatherHandler(DetHandler):
    """Single-container tasks: all_gather of one participant returns its own data."""
    max_body = 4 * 1024 * 1024

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    def post(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        authorize_allocation(self, allocation_id)
        data = self.body_json().get("data")
        self.send({"data": [data]})


class CheckpointsHandler(DetHandler):
    max_body = 16 * 1024 * 1024
    permissions = {"POST": Perm.UPDATE_EXPERIMENT, "PATCH": Perm.UPDATE_EXPERIMENT,
                   "DELETE": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    def delete(self) -> None:
        _models.delete_checkpoints(self)  # DeleteCheckpoints: users' deletes (see _models)

    def post(self) -> None:
        body = self.body_json()
        ckpt = body.get("checkpoint", body)
        p = self.principal
        trial_id = None
        task_id = ckpt.get("taskId")
        alloc_id = ckpt.get("allocationId")
        if isinstance(p, AllocationPrincipal):
            trial_id, task_id, alloc_id = p.trial_id, p.task_id, p.allocation_id
            self.mark_checked()  # its own checkpoint
        else:
            raise InvalidRequest("checkpoints are reported by the task that wrote them")
        self.master.checkpoints.report(ckpt, trial_id=trial_id, task_id=task_id, allocation_id=alloc_id)
        self.send({})

    def patch(self) -> None:
        # Partial deletes (checkpoint.delete from a task): accepted, nothing removed.
        self.body_json()
        if not isinstance(self.principal, AllocationPrincipal):
            raise InvalidRequest("checkpoints are patched by the task that wrote them")
        self.mark_checked()
        self.send({})


class CheckpointHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    def get(self, uuid: str) -> None:
        row = self.master.checkpoints.get(uuid)
        p = self.principal
        if isinstance(p, AllocationPrincipal) and row.experiment_id != p.experiment_id:
            raise NotFound(f"checkpoint {uuid} not found")
        self.authorize_checkpoint(uuid)
        trial = self.master.views.trial(row.trial_id) if row.trial_id else None
        cfg = self.master.experiments.get(row.experiment_id).config if row.experiment_id else None
        self.send({"checkpoint": ser.checkpoint(row, trial_row=trial.row if trial else None, exp_config=cfg)})

