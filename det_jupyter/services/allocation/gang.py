"""Where an allocation runs: its containers (one per agent; ``Container`` is the resource
managers' record, ``rm.base``) and the ports its gang uses."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import Conflict
from ...rm.base import Container

#: Each gang gets a block of four ports from here, unique among live allocations: the torch
#: rendezvous port on its chief, the harness collectives' port, and the stock harness's two
#: ZMQ ports (DET_RENDEZVOUS_PORT, DET_COLLECTIVE_PORT, INTER_TRAIN_PROCESS_COMM_PORT_1/2).
#: The blocks end below 32768, where Linux's ephemeral range starts by default
#: (net.ipv4.ip_local_port_range): a port in that range can be any outgoing connection's local
#: port at the moment the gang binds it, and the trial then fails with EADDRINUSE.
PORT_BASE = 29400
PORT_BLOCK = 4
EPHEMERAL_START = 32768
PORT_BLOCKS = (EPHEMERAL_START - PORT_BASE) // PORT_BLOCK


@dataclass(frozen=True)
class Gang:
    """Where an allocation runs: its containers in rank order (the chief first) and its ports."""

    containers: tuple[Container, ...]
    rendezvous_port: int
    collective_port: int


def free_port(taken: set[int], start: int = 0) -> int:
    """The first port block not in ``taken``, looking from block ``start`` on (and around).

    Each master starts at a random block and moves on after each placement, so two masters on
    one host (test runs, a laptop's and a cluster's) rarely hand out the same port, and a port
    just freed is not handed out again at once."""
    for i in range(PORT_BLOCKS):
        port = PORT_BASE + PORT_BLOCK * ((start + i) % PORT_BLOCKS)
        if port not in taken:
            return port
    raise Conflict(f"all {PORT_BLOCKS} rendezvous port blocks from {PORT_BASE} are in use")
