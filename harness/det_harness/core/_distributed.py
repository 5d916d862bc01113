"""``core.distributed``: who this process is in a distributed job, and small collectives.

Ranks come from the torch launcher's environment (``RANK``, ``WORLD_SIZE``, ...; see
``det_harness.launch.torch_distributed``). The collectives (:meth:`DistributedContext.allgather`,
``gather``, ``broadcast`` and their ``_local`` forms) move small picklable objects over plain
sockets (``_collective.py``): the world's chief (rank 0) listens on ``DET_COLLECTIVE_PORT`` and
the others connect to it at ``MASTER_ADDR``; each container's local chief listens on a Unix
socket. Sockets are opened (and ``_collective`` imported) on the first collective call, so a
single-process trial pays nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._collective import Address, Group

#: Seconds a rank waits for the others in one collective (``DET_COLLECTIVE_TIMEOUT``).
DEFAULT_TIMEOUT = 600.0


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable {key}={raw!r} must be an integer") from exc


def collective_timeout(environ: Mapping[str, str]) -> float:
    """``DET_COLLECTIVE_TIMEOUT`` in seconds (default :data:`DEFAULT_TIMEOUT`)."""
    raw = environ.get("DET_COLLECTIVE_TIMEOUT", "")
    if raw == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"DET_COLLECTIVE_TIMEOUT={raw!r} must be a number of seconds") from exc
    if not value > 0:
        raise ValueError(f"DET_COLLECTIVE_TIMEOUT={raw!r} must be more than 0 seconds")
    return value


class _Groups:
    """The lazily opened socket groups of one context (mutable state of a frozen dataclass)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.world: Group | None = None
        self.local: Group | None = None
        self.closed = False


@dataclass(frozen=True)
class DistributedContext:
    """Ranks of this process, and collectives across them.

    Only the chief (rank 0) reports metrics and checkpoints; ``core.preempt.should_preempt()``
    and ``core.checkpoint.store_path(shard=True)`` use the collectives, so every rank must call
    them in the same order. A collective that cannot complete (a rank died, a rank skipped a
    call, ``timeout`` seconds passed) raises ``det_harness.core._collective.CollectiveError``
    (a RuntimeError) naming the rank.

    ``chief_ip`` is where the other containers reach rank 0 (defaults to loopback when there is
    one container), ``collective_port`` the port rank 0 listens on, ``secret`` the key that both
    sides prove they hold before exchanging anything (the allocation's session token).
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    cross_rank: int = 0
    cross_size: int = 1
    chief_ip: str | None = None
    collective_port: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    secret: str = field(default="", repr=False, compare=False)
    _groups: _Groups = field(default_factory=_Groups, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.size:
            raise ValueError(f"rank {self.rank} must be in [0, size={self.size})")
        if not 0 <= self.local_rank < self.local_size:
            raise ValueError(f"local_rank {self.local_rank} must be in [0, local_size={self.local_size})")
        if not 0 <= self.cross_rank < self.cross_size:
            raise ValueError(f"cross_rank {self.cross_rank} must be in [0, cross_size={self.cross_size})")
        if self.collective_port is not None and not 0 < self.collective_port < 65536:
            raise ValueError(f"collective_port {self.collective_port} must be in [1, 65535]")
        if not self.timeout > 0:
            raise ValueError(f"timeout {self.timeout} must be more than 0 seconds")

    @property
    def is_chief(self) -> bool:
        """True on rank 0, the process that talks to the master."""
        return self.rank == 0

    @property
    def is_local_chief(self) -> bool:
        """True on local rank 0 of each node."""
        return self.local_rank == 0

    def get_rank(self) -> int:
        """This process's rank in the job (Determined's accessor)."""
        return self.rank

    def get_local_rank(self) -> int:
        """This process's rank in its container."""
        return self.local_rank

    def get_size(self) -> int:
        """The number of processes in the job."""
        return self.size

    def get_num_agents(self) -> int:
        """The number of containers (nodes) in the job."""
        return self.cross_size

    @classmethod
    def from_torch_distributed(
        cls, environ: Mapping[str, str] | None = None, *, chief_ip: str | None = None,
    ) -> DistributedContext:
        """Read RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE.

        Missing variables default to a single process. The collectives use ``MASTER_ADDR`` (or
        ``chief_ip``, or ``DET_CHIEF_IP``), ``DET_COLLECTIVE_PORT`` (default ``MASTER_PORT`` + 1),
        ``DET_COLLECTIVE_TIMEOUT`` (seconds) and ``DET_SESSION_TOKEN``.
        """
        env = os.environ if environ is None else environ
        size = _env_int(env, "WORLD_SIZE", 1)
        master_port = _env_int(env, "MASTER_PORT", 0)
        port = _env_int(env, "DET_COLLECTIVE_PORT", master_port + 1 if master_port else 0)
        return cls(
            rank=_env_int(env, "RANK", 0),
            size=size,
            local_rank=_env_int(env, "LOCAL_RANK", 0),
            local_size=_env_int(env, "LOCAL_WORLD_SIZE", size),
            cross_rank=_env_int(env, "GROUP_RANK", 0),
            cross_size=_env_int(env, "GROUP_WORLD_SIZE", 1),
            chief_ip=chief_ip or env.get("MASTER_ADDR") or env.get("DET_CHIEF_IP") or None,
            collective_port=port or None,
            timeout=collective_timeout(env),
            secret=env.get("DET_SESSION_TOKEN", ""),
        )

    # -- collectives ---------------------------------------------------------------------------

    def allgather(self, stuff: Any) -> list:
        """Every rank gets the list of every rank's ``stuff``, in rank order."""
        if self.size < 2:
            return [stuff]
        return list(self._world().exchange("allgather", stuff))

    def gather(self, stuff: Any) -> list | None:
        """The chief gets the list of every rank's ``stuff`` (rank order); the others get None."""
        if self.size < 2:
            return [stuff]
        out = self._world().exchange("gather", stuff)
        return list(out) if self.is_chief else None

    def broadcast(self, stuff: Any) -> Any:
        """Every rank gets the chief's ``stuff`` (the others' arguments are ignored)."""
        if self.size < 2:
            return stuff
        out = self._world().exchange("broadcast", stuff)
        return stuff if self.is_chief else out

    def allgather_local(self, stuff: Any) -> list:
        """:meth:`allgather` across the ranks of this container (in local-rank order)."""
        if self.local_size < 2:
            return [stuff]
        return list(self._local().exchange("allgather", stuff))

    def gather_local(self, stuff: Any) -> list | None:
        """:meth:`gather` to this container's local chief (local rank 0)."""
        if self.local_size < 2:
            return [stuff]
        out = self._local().exchange("gather", stuff)
        return list(out) if self.is_local_chief else None

    def broadcast_local(self, stuff: Any = None) -> Any:
        """:meth:`broadcast` from this container's local chief."""
        if self.local_size < 2:
            return stuff
        out = self._local().exchange("broadcast", stuff)
        return stuff if self.is_local_chief else out

    def close(self) -> None:
        """Close the collective sockets (idempotent); ``core.init()``'s context does this."""
        groups = self._groups
        with groups.lock:
            groups.closed = True
            for group in (groups.world, groups.local):
                if group is not None:
                    group.close()

    # -- groups --------------------------------------------------------------------------------

    def _world(self) -> Group:
        from ._collective import Group

        groups = self._groups
        with groups.lock:
            self._check_open()
            if groups.world is None:
                groups.world = Group(self.rank, self.size, world_address(self), secret=self.secret,
                                     timeout=self.timeout, name="world")
            return groups.world

    def _local(self) -> Group:
        from ._collective import Group

        groups = self._groups
        with groups.lock:
            self._check_open()
            if groups.local is None:
                groups.local = Group(self.local_rank, self.local_size, local_address(self),
                                     secret=self.secret, timeout=self.timeout, name="local")
            return groups.local

    def _check_open(self) -> None:
        from ._collective import CollectiveError

        if self._groups.closed:
            raise CollectiveError(f"rank {self.rank}: the DistributedContext is closed (its "
                                  "`with core.init()` block has ended); no more collectives")


def world_address(dist: DistributedContext) -> tuple[str, int]:
    """Where the world's chief listens: ``(chief_ip, collective_port)``."""
    if dist.collective_port is None:
        raise ValueError("no port for the harness collectives: set DET_COLLECTIVE_PORT (the "
                         "master sets it for distributed trials) or MASTER_PORT, or pass "
                         "collective_port= to DistributedContext")
    if dist.cross_size == 1:
        return ("127.0.0.1", dist.collective_port)  # one container: always loopback
    if not dist.chief_ip:
        raise ValueError(f"cross_size {dist.cross_size} > 1 needs the chief's address: set "
                         "MASTER_ADDR (the launcher does) or pass chief_ip= to DistributedContext")
    return (dist.chief_ip, dist.collective_port)


def local_address(dist: DistributedContext) -> Address:
    """A Unix socket unique to this job and container: its local chief listens there."""
    import hashlib

    key = f"{dist.chief_ip}|{dist.collective_port}|{dist.cross_rank}|{dist.size}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    if sys.platform.startswith("linux"):
        return f"\0det-harness-{digest}"  # abstract: no file to clean up
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"det-harness-{digest}.sock")
