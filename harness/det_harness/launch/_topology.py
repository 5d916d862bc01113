"""Pure planning for the torch launcher: the trial's containers → torchrun's arguments.

The master sets, in every container of a trial: ``DET_CONTAINER_RANK`` (0 = chief),
``DET_CONTAINER_ADDRS`` and ``DET_CONTAINER_SLOT_COUNTS`` (JSON lists in container-rank order),
``DET_SLOT_IDS``, ``DET_RENDEZVOUS_PORT`` (torch's static rendezvous on the chief) and
``DET_COLLECTIVE_PORT`` (the harness collectives, see ``det_harness.core._collective``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..info import check_topology, read_topology

#: The module each worker runs under torchrun: it prefixes the command's output with the rank.
WRAP_MODULE = "det_harness.launch.wrap_rank"


@dataclass(frozen=True)
class Topology:
    """The trial's containers as this container sees them."""

    container_rank: int
    container_addrs: tuple[str, ...]
    slot_counts: tuple[int, ...]
    rendezvous_port: int | None = None
    collective_port: int | None = None

    def __post_init__(self) -> None:
        check_topology(self.container_rank, list(self.container_addrs), list(self.slot_counts))
        for name in ("rendezvous_port", "collective_port"):
            port = getattr(self, name)
            if port is not None and not 0 < port < 65536:
                raise ValueError(f"{name} {port} must be in [1, 65535]")
        if self.nnodes > 1 and self.rendezvous_port is None:
            raise ValueError(f"{self.nnodes} containers need DET_RENDEZVOUS_PORT (the chief's "
                             "torch rendezvous port), which the master sets for distributed "
                             "trials; it is missing")

    @property
    def nnodes(self) -> int:
        """How many containers (torchrun nodes) the trial has."""
        return len(self.container_addrs)

    @property
    def nproc(self) -> int:
        """Workers in this container: one per slot (at least one, for a zero-slot task)."""
        return max(1, self.slot_counts[self.container_rank])

    @property
    def chief_addr(self) -> str:
        """Where the other containers reach the chief (loopback when there is one container)."""
        return "127.0.0.1" if self.nnodes == 1 else self.container_addrs[0]


def _port(env: Mapping[str, str], key: str) -> int | None:
    raw = env.get(key, "")
    if raw == "":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable {key}={raw!r} must be a port number") from exc


def topology_from_env(env: Mapping[str, str]) -> Topology:
    """Read the :class:`Topology` from the ``DET_*`` variables (defaults: one container)."""
    rank, addrs, counts = read_topology(dict(env))
    return Topology(rank, tuple(addrs), tuple(counts), _port(env, "DET_RENDEZVOUS_PORT"),
                    _port(env, "DET_COLLECTIVE_PORT"))


def split_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``[TORCH_OVERRIDES... --] CMD ARGS...`` → ``(overrides, cmd)``.

    Overrides are recognised only when the arguments start with an option, so
    ``python train.py -- --flag`` is a command whose own arguments contain ``--``.
    """
    args = list(args)
    if args and args[0] == "--":
        return [], args[1:]
    if args and args[0].startswith("-") and "--" in args:
        split = args.index("--")
        return args[:split], args[split + 1:]
    return [], args


def torchrun_argv(topo: Topology, python: str, overrides: Sequence[str],
                  cmd: Sequence[str], master_port: int) -> list[str]:
    """The torchrun command line (static rendezvous, no restarts); ``overrides`` win."""
    return [
        python, "-m", "torch.distributed.run",
        "--nnodes", str(topo.nnodes),
        "--nproc_per_node", str(topo.nproc),
        "--node_rank", str(topo.container_rank),
        "--max_restarts", "0",
        "--rdzv_backend", "static",
        "--master_addr", topo.chief_addr,
        "--master_port", str(master_port),
        *overrides,
        "--module", WRAP_MODULE, "RANK", "--", *cmd,
    ]


def launcher_env(topo: Topology, master_port: int, collective_port: int) -> dict[str, str]:
    """Variables the launcher adds for its workers (torchrun adds the ranks).

    ``DET_CHIEF_IP`` and ``USE_TORCH_DISTRIBUTED`` are what Determined's own launcher sets, for
    scripts that use the stock ``determined`` library.
    """
    return {
        "USE_TORCH_DISTRIBUTED": "True",
        "DET_CHIEF_IP": topo.chief_addr,
        "DET_COLLECTIVE_PORT": str(collective_port),
        "MASTER_ADDR": topo.chief_addr,
        "MASTER_PORT": str(master_port),
    }


def single_worker_env(topo: Topology, master_port: int, collective_port: int) -> dict[str, str]:
    """What torchrun would give the only worker of a one-container, one-slot trial."""
    return {
        **launcher_env(topo, master_port, collective_port),
        "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": "0", "ROLE_WORLD_SIZE": "1",
    }
