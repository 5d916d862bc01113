"""The master ↔ agent contract: the task spec and every websocket frame, as frozen records.

Both sides build frames from these records (``to_wire()``: the JSON object that goes on the
socket) and read what arrives with ``from_wire(dict)``, which checks every key and raises a
ValueError naming the frame and the key on a bad frame. docs/internals.md ("Master ↔ agent
protocol") describes the same objects; the dicts ``to_wire`` gives are that format exactly.

Master → agent: :class:`Welcome`, :class:`Refused`, :class:`StartTask` (with a
:class:`TaskSpec`), :class:`KillTask`, :class:`Ack`. Agent → master: :class:`Hello`,
:class:`SlotStatsReport`, :class:`TaskPulling`, :class:`TaskStarted`, :class:`Logs`, :class:`TaskExited`,
:class:`Leaving`. The three task frames go through the agent's outbox, which numbers them
(``id``); the master acknowledges them with an :class:`Ack`.

This module is shared by det_jupyter (the master) and det_agent; it imports nothing of the
master.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from . import _wire_check as check
from ._devices import Slot
from ._stats import SlotStats

__all__ = [
    "AGENT_FRAMES", "MASTER_FRAMES", "Ack", "AgentFrame", "BindMount", "Container", "Device", "Hello",
    "KillTask", "Leaving",
    "LogLine", "Logs", "MasterFrame", "Mount", "Refused", "RunAs", "Slot", "SlotStats",
    "SlotStatsReport", "StartTask", "TaskExited", "TaskPulling", "TaskSpec", "TaskStarted", "Welcome",
    "parse_agent_frame", "parse_master_frame",
]


# -- a line of task output ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One line of task output, as it goes into a ``logs`` frame."""

    seq: int
    stdtype: str  # "stdout" | "stderr"
    log: str  # the text, always ending in "\n" like Determined's log shipper
    timestamp: str  # ISO-8601 UTC
    rank_id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """The line as the protocol's ``{"seq", "stdtype", "log", "timestamp", "rank_id"}``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, raw: Any) -> LogLine:
        """One line of a ``logs`` frame; ValueError naming the key when it is not one."""
        what = "a logs frame's line"
        d = check.obj(raw, what)
        return cls(check.integer(d, "seq", what), check.string(d, "stdtype", what),
                   check.string(d, "log", what), check.string(d, "timestamp", what),
                   check.opt_integer(d, "rank_id", what))



# -- the task spec ------------------------------------------------------------------------


_RANK = re.compile(r"^ ?\[rank=(\d+)\] ?")


def split_rank(text: str) -> tuple[int | None, str]:
    """Strip a leading ``[rank=N]`` (what Determined's launchers print) into a rank id: how
    every runtime, and a Kubernetes pod's log reader, gives a line its ``rank_id``."""
    m = _RANK.match(text)
    if m is None:
        return None, text
    return int(m.group(1)), text[m.end() :]


@dataclass(frozen=True)
class RunAs:
    """The account a linked owner's tasks run as on agents (``spec.run_as``)."""

    uid: int
    gid: int
    user: str | None = None
    group: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"uid": self.uid, "gid": self.gid, "user": self.user, "group": self.group}

    @classmethod
    def from_wire(cls, raw: Any) -> RunAs:
        what = "spec.run_as"
        d = check.obj(raw, what)
        return cls(check.integer(d, "uid", what), check.integer(d, "gid", what),
                   check.opt_string(d, "user", what), check.opt_string(d, "group", what))


@dataclass(frozen=True)
class Mount:
    """A host path bound into the task's namespace; ``create``: the agent makes the host path
    (for the task's account) when it is missing. None: the key is not sent."""

    host_path: str
    container_path: str
    create: bool | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host_path": self.host_path, "container_path": self.container_path}
        if self.create is not None:
            out["create"] = self.create
        return out

    @classmethod
    def from_wire(cls, raw: Any) -> Mount:
        what = "a spec.mounts entry"
        d = check.obj(raw, what)
        create = d.get("create")
        if create is not None and not isinstance(create, bool):
            raise ValueError(f"{what}: create must be true or false, got {create!r}")
        return cls(check.string(d, "host_path", what), check.string(d, "container_path", what), create)


@dataclass(frozen=True)
class BindMount:
    """A host path bound into the task's container (0.38.1's ``bind_mounts`` entry);
    ``propagation``: Docker's (``rprivate`` by default)."""

    host_path: str
    container_path: str
    read_only: bool = False
    propagation: str = "rprivate"

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, raw: Any) -> BindMount:
        what = "a spec.container.bind_mounts entry"
        d = check.obj(raw, what)
        read_only = d.get("read_only", False)
        if not isinstance(read_only, bool):
            raise ValueError(f"{what}: read_only must be true or false, got {read_only!r:.80}")
        return cls(check.string(d, "host_path", what), check.string(d, "container_path", what), read_only,
                   check.string(d, "propagation", what, "rprivate"))


@dataclass(frozen=True)
class Device:
    """A host device handed to the container (0.38.1's ``resources.devices`` entry)."""

    host_path: str
    container_path: str
    mode: str = "mrw"

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, raw: Any) -> Device:
        what = "a spec.container.devices entry"
        d = check.obj(raw, what)
        return cls(check.string(d, "host_path", what), check.string(d, "container_path", what),
                   check.string(d, "mode", what, "mrw"))


@dataclass(frozen=True)
class Container:
    """Run the task in a container (the agent's Docker runtime), as the master resolved the
    experiment's ``environment`` and ``resources`` for the slots' device type: ``image`` and
    the environment variables are already the device's. ``registry_auth``: Docker's auth
    config (username, password, serveraddress, …). ``shm_size``: bytes (None: Docker's)."""

    image: str
    force_pull: bool = False
    registry_auth: Mapping[str, str] | None = None
    bind_mounts: tuple[BindMount, ...] = ()
    devices: tuple[Device, ...] = ()
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    shm_size: int | None = None
    #: ``environment.pod_spec``: a Kubernetes pod merged under the task's own (Kubernetes only;
    #: agents ignore it)
    pod_spec: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "image": self.image,
            "force_pull": self.force_pull,
            "bind_mounts": [b.to_wire() for b in self.bind_mounts],
            "devices": [d.to_wire() for d in self.devices],
            "add_capabilities": list(self.add_capabilities),
            "drop_capabilities": list(self.drop_capabilities),
        }
        if self.registry_auth is not None:
            out["registry_auth"] = dict(self.registry_auth)
        if self.shm_size is not None:
            out["shm_size"] = self.shm_size
        if self.pod_spec is not None:
            out["pod_spec"] = dict(self.pod_spec)
        return out

    @classmethod
    def from_wire(cls, raw: Any) -> Container:
        what = "spec.container"
        d = check.obj(raw, what)
        force = d.get("force_pull", False)
        if not isinstance(force, bool):
            raise ValueError(f"{what}: force_pull must be true or false, got {force!r:.80}")
        auth = d.get("registry_auth")
        if auth is not None:
            auth = check.obj(auth, f"{what}.registry_auth")
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in auth.items()):
                raise ValueError(f"{what}: registry_auth must map names to strings")
            auth = dict(auth)
        return cls(
            image=check.string(d, "image", what),
            force_pull=force,
            registry_auth=auth,
            bind_mounts=tuple(BindMount.from_wire(b) for b in check.array(d, "bind_mounts", what, [])),
            devices=tuple(Device.from_wire(x) for x in check.array(d, "devices", what, [])),
            add_capabilities=check.strings(d, "add_capabilities", what, []),
            drop_capabilities=check.strings(d, "drop_capabilities", what, []),
            shm_size=check.opt_integer(d, "shm_size", what),
            pod_spec=None if d.get("pod_spec") is None else dict(check.obj(d["pod_spec"], f"{what}.pod_spec")),
        )


@dataclass(frozen=True)
class TaskSpec:
    """What one container of an allocation runs (docs/internals.md "TaskSpec").

    ``entrypoint``: a shell command line, or an argv. ``info_files``: JSON documents the agent
    writes into the task's info directory, by name. The optional fields are left out of the
    wire object when None.
    """

    task_id: str
    allocation_id: str
    task_type: str
    entrypoint: str | tuple[str, ...]
    env: Mapping[str, str]
    slot_ids: tuple[int, ...]
    info_files: Mapping[str, Any]
    mounts: tuple[Mount, ...] = ()
    context_url: str | None = None
    context_digest: str | None = None
    run_as: RunAs | None = None
    #: None: a process (the process runtime); else the container to run it in
    container: Container | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "allocation_id": self.allocation_id,
            "task_type": self.task_type,
            "entrypoint": self.entrypoint if isinstance(self.entrypoint, str) else list(self.entrypoint),
            "env": dict(self.env),
            "slot_ids": list(self.slot_ids),
        }
        if self.context_url is not None:
            out["context_url"] = self.context_url
        out["info_files"] = dict(self.info_files)
        out["mounts"] = [m.to_wire() for m in self.mounts]
        if self.context_digest is not None:
            out["context_digest"] = self.context_digest
        if self.run_as is not None:
            out["run_as"] = self.run_as.to_wire()
        if self.container is not None:
            out["container"] = self.container.to_wire()
        return out

    @classmethod
    def from_wire(cls, raw: Any) -> TaskSpec:
        what = "a task spec"
        d = check.obj(raw, what)
        entry = check.get(d, "entrypoint", what)
        entrypoint: str | tuple[str, ...]
        if isinstance(entry, str):
            entrypoint = entry
        elif isinstance(entry, list) and all(isinstance(x, str) for x in entry):
            entrypoint = tuple(entry)
        else:
            raise ValueError(f"{what}: entrypoint must be a string or a list of strings, got {entry!r:.80}")
        env = check.obj(check.get(d, "env", what, {}), f"{what}'s env")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError(f"{what}: env must map names to string values")
        slot_ids = check.array(d, "slot_ids", what, [])
        if not all(check.is_int(s) for s in slot_ids):
            raise ValueError(f"{what}: slot_ids must be a list of integers, got {slot_ids!r:.80}")
        allocation_id = check.string(d, "allocation_id", what)
        if not allocation_id:
            raise ValueError(f"{what}: allocation_id is empty")
        run_as = d.get("run_as")
        return cls(
            task_id=check.string(d, "task_id", what),
            allocation_id=allocation_id,
            task_type=check.string(d, "task_type", what),
            entrypoint=entrypoint,
            env=dict(env),
            slot_ids=tuple(slot_ids),
            info_files=dict(check.obj(check.get(d, "info_files", what, {}), f"{what}'s info_files")),
            mounts=tuple(Mount.from_wire(m) for m in check.array(d, "mounts", what, [])),
            context_url=check.opt_string(d, "context_url", what),
            context_digest=check.opt_string(d, "context_digest", what),
            run_as=None if run_as is None else RunAs.from_wire(run_as),
            container=None if d.get("container") is None else Container.from_wire(d["container"]),
        )


# -- master → agent -----------------------------------------------------------------------


@dataclass(frozen=True)
class Welcome:
    """The master's first frame on every connection."""

    TYPE: ClassVar[str] = "welcome"
    master_id: str
    cluster_id: str

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "master_id": self.master_id, "cluster_id": self.cluster_id}

    @classmethod
    def from_wire(cls, raw: Any) -> Welcome:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "master_id", cls.TYPE), check.string(d, "cluster_id", cls.TYPE))


@dataclass(frozen=True)
class Refused:
    """The master turns the agent away (e.g. an unknown resource pool) and hangs up."""

    TYPE: ClassVar[str] = "refused"
    message: str

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "message": self.message}

    @classmethod
    def from_wire(cls, raw: Any) -> Refused:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "message", cls.TYPE))


@dataclass(frozen=True)
class StartTask:
    """Run ``spec`` (one container of a placed allocation)."""

    TYPE: ClassVar[str] = "start_task"
    spec: TaskSpec

    @property
    def allocation_id(self) -> str:
        return self.spec.allocation_id

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "allocation_id": self.spec.allocation_id, "spec": self.spec.to_wire()}

    @classmethod
    def from_wire(cls, raw: Any) -> StartTask:
        d = check.frame_of(raw, cls.TYPE)
        spec = TaskSpec.from_wire(check.get(d, "spec", cls.TYPE))
        if "allocation_id" in d and d["allocation_id"] != spec.allocation_id:
            raise ValueError(f"a {cls.TYPE} frame's allocation_id {d['allocation_id']!r:.80} is not "
                             f"its spec's ({spec.allocation_id!r})")
        return cls(spec)


@dataclass(frozen=True)
class KillTask:
    """SIGKILL the allocation's task on this agent now."""

    TYPE: ClassVar[str] = "kill_task"
    allocation_id: str

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "allocation_id": self.allocation_id}

    @classmethod
    def from_wire(cls, raw: Any) -> KillTask:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "allocation_id", cls.TYPE))


@dataclass(frozen=True)
class Ack:
    """The master stored every outbox frame up to ``id``."""

    TYPE: ClassVar[str] = "ack"
    id: int

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "id": self.id}

    @classmethod
    def from_wire(cls, raw: Any) -> Ack:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.integer(d, "id", cls.TYPE))


# -- agent → master -----------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """The agent's first frame after every connect. ``running``: the allocations it still runs
    (or whose exit the master has not acknowledged); ``address``: what other containers reach
    this host at (distributed rendezvous); ``containers``: ``"docker"`` when it runs tasks
    that name an image, else why it cannot (``"no Docker engine at unix:///var/run/docker.sock"``;
    empty from agents older than the Docker runtime)."""

    TYPE: ClassVar[str] = "hello"
    agent_id: str
    resource_pool: str
    slots: tuple[Slot, ...]
    running: tuple[str, ...]
    version: str
    address: str
    containers: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": self.TYPE, "agent_id": self.agent_id, "resource_pool": self.resource_pool,
            "slots": [s.to_wire() for s in self.slots], "running": list(self.running),
            "version": self.version, "address": self.address, "containers": self.containers,
        }

    @classmethod
    def from_wire(cls, raw: Any) -> Hello:
        d = check.frame_of(raw, cls.TYPE)
        # Only the agent's id is required: an agent that names no pool joins the default one,
        # one that gives no address is reached at 127.0.0.1 (as before the frames were typed).
        return cls(
            agent_id=check.string(d, "agent_id", cls.TYPE),
            resource_pool=check.string(d, "resource_pool", cls.TYPE, default=""),
            slots=tuple(Slot.from_wire(s) for s in check.array(d, "slots", cls.TYPE, default=[])),
            running=check.strings(d, "running", cls.TYPE, default=[]),
            version=check.string(d, "version", cls.TYPE, default=""),
            address=check.string(d, "address", cls.TYPE, default="") or "127.0.0.1",
            containers=check.string(d, "containers", cls.TYPE, default=""),
        )


@dataclass(frozen=True)
class SlotStatsReport:
    """Current GPU figures per slot; sent only while connected, never replayed."""

    TYPE: ClassVar[str] = "slot_stats"
    slots: tuple[SlotStats, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "slots": [s.to_wire() for s in self.slots]}

    @classmethod
    def from_wire(cls, raw: Any) -> SlotStatsReport:
        d = check.frame_of(raw, cls.TYPE)
        return cls(tuple(SlotStats.from_wire(s) for s in check.array(d, "slots", cls.TYPE)))


def _with_id(out: dict[str, Any], frame_id: int | None) -> dict[str, Any]:
    if frame_id is not None:
        out["id"] = frame_id
    return out


@dataclass(frozen=True)
class TaskStarted:
    """The task's entrypoint process was spawned. ``id``: its outbox number, once it has one."""

    TYPE: ClassVar[str] = "task_started"
    allocation_id: str
    pid: int
    id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return _with_id({"type": self.TYPE, "allocation_id": self.allocation_id, "pid": self.pid}, self.id)

    @classmethod
    def from_wire(cls, raw: Any) -> TaskStarted:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "allocation_id", cls.TYPE), check.integer(d, "pid", cls.TYPE),
                   check.opt_integer(d, "id", cls.TYPE))


@dataclass(frozen=True)
class TaskPulling:
    """The task's image is being pulled before its container is created (the task shows
    PULLING until its ``task_started``). ``id``: its outbox number, once it has one."""

    TYPE: ClassVar[str] = "task_pulling"
    allocation_id: str
    image: str
    id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return _with_id({"type": self.TYPE, "allocation_id": self.allocation_id, "image": self.image}, self.id)

    @classmethod
    def from_wire(cls, raw: Any) -> TaskPulling:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "allocation_id", cls.TYPE), check.string(d, "image", cls.TYPE),
                   check.opt_integer(d, "id", cls.TYPE))


@dataclass(frozen=True)
class Logs:
    """A batch of the task's log lines, in order (``seq`` counts per container)."""

    TYPE: ClassVar[str] = "logs"
    allocation_id: str
    lines: tuple[LogLine, ...]
    id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return _with_id({"type": self.TYPE, "allocation_id": self.allocation_id,
                         "lines": [line.to_wire() for line in self.lines]}, self.id)

    @classmethod
    def from_wire(cls, raw: Any) -> Logs:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "allocation_id", cls.TYPE),
                   tuple(LogLine.from_wire(ln) for ln in check.array(d, "lines", cls.TYPE)),
                   check.opt_integer(d, "id", cls.TYPE))


@dataclass(frozen=True)
class TaskExited:
    """The task is gone; all its log lines were sent before this frame."""

    TYPE: ClassVar[str] = "task_exited"
    allocation_id: str
    exit_code: int
    reason: str | None
    id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return _with_id({"type": self.TYPE, "allocation_id": self.allocation_id,
                         "exit_code": self.exit_code, "reason": self.reason}, self.id)

    @classmethod
    def from_wire(cls, raw: Any) -> TaskExited:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.string(d, "allocation_id", cls.TYPE), check.integer(d, "exit_code", cls.TYPE),
                   check.opt_string(d, "reason", cls.TYPE), check.opt_integer(d, "id", cls.TYPE))


@dataclass(frozen=True)
class Leaving:
    """A planned stop: the master places nothing more on the agent and preempts its tasks;
    those still running after ``timeout_s`` seconds are killed. Sent again after every hello."""

    TYPE: ClassVar[str] = "leaving"
    timeout_s: float

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, "timeout_s": self.timeout_s}

    @classmethod
    def from_wire(cls, raw: Any) -> Leaving:
        d = check.frame_of(raw, cls.TYPE)
        return cls(check.number(d, "timeout_s", cls.TYPE))


MasterFrame: TypeAlias = Welcome | Refused | StartTask | KillTask | Ack
AgentFrame: TypeAlias = Hello | SlotStatsReport | TaskPulling | TaskStarted | Logs | TaskExited | Leaving
#: Each side's frames by their ``type``.
MASTER_FRAMES: Mapping[str, Any] = {f.TYPE: f for f in (Welcome, Refused, StartTask, KillTask, Ack)}
AGENT_FRAMES: Mapping[str, Any] = {
    f.TYPE: f for f in (Hello, SlotStatsReport, TaskPulling, TaskStarted, Logs, TaskExited, Leaving)
}


def parse_master_frame(raw: Any) -> MasterFrame:
    """A decoded frame from the master; ValueError when it is not one."""
    frame: MasterFrame = _kind(raw, MASTER_FRAMES, "the master").from_wire(raw)
    return frame


def parse_agent_frame(raw: Any) -> AgentFrame:
    """A decoded frame from an agent; ValueError when it is not one."""
    frame: AgentFrame = _kind(raw, AGENT_FRAMES, "an agent").from_wire(raw)
    return frame


def _kind(raw: Any, kinds: Mapping[str, Any], sender: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ValueError(f"a frame from {sender} must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in kinds:
        raise ValueError(f"unknown frame type {kind!r:.40} from {sender}; "
                         f"expected one of {', '.join(sorted(kinds))}")
    return kinds[kind]
