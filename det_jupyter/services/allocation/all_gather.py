"""All-gather among the containers of one allocation (``POST /api/v1/allocations/{id}/all_gather``),
in memory, as 0.38.1's master does it (``master/internal/task/allgather``).

A round of an allocation collects one ``data`` per distinct ``requestUuid``; once ``numPeers``
of them are in, every waiting request is answered with all the data (in the order the
requests arrived) and the next request starts a new round. A request that repeats a waiting
``requestUuid`` (a client's retry) replaces the earlier one, whose waiter gets
:class:`~det_jupyter.errors.Conflict`. A waiter whose peers do not come within the timeout gets
:class:`~det_jupyter.errors.Unavailable`; one whose allocation ends gets ``Conflict``. The
stock harness uses it for the rendezvous of a Kubernetes gang (``prep_container
--rendezvous`` with ``DET_RESOURCES_TYPE=k8s-job``: ``numPeers`` is the gang's pod count) and
for its ``DistributedContext`` outside Horovod.

No state survives a restart of the master: its waiters' connections close with it, and the
clients' retries start the round afresh.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from ...errors import Conflict, InvalidRequest, Unavailable

#: How long a request waits for its peers (0.38.1's ``allgather.DefaultTimeout``), seconds.
DEFAULT_TIMEOUT_S = 600.0
#: How often a waiter checks that its allocation still runs, seconds.
LIVENESS_POLL_S = 5.0
TIMEOUT_MESSAGE = (
    "all_gather of allocation {alloc}: {have} of {want} peers connected within {timeout:g} s; "
    "some containers of the gang never started or failed before they joined (on Kubernetes: a "
    "pod that was never scheduled or is still pulling its image); see the task's logs")


@dataclasses.dataclass
class _Round:
    """The requests of the current round, by requestUuid, in arrival order (a dict keeps it)."""

    num_peers: int
    waiters: dict[str, tuple[Any, asyncio.Future[list[Any]]]] = dataclasses.field(default_factory=dict)


class AllGathers:
    """The open all-gather rounds of every allocation (one event loop's; not thread-safe)."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, poll_s: float = LIVENESS_POLL_S) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if poll_s <= 0:
            raise ValueError(f"poll_s must be > 0, got {poll_s}")
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._rounds: dict[str, _Round] = {}

    def waiting(self, allocation_id: str) -> list[str]:
        """The requestUuids waiting in the allocation's current round, in arrival order."""
        r = self._rounds.get(allocation_id)
        return list(r.waiters) if r is not None else []

    def join(self, allocation_id: str, request_uuid: str, num_peers: int, data: Any) -> asyncio.Future[list[Any]]:
        """Add a participant to the allocation's round; the future is its answer (already
        done when this completes the round, e.g. with ``num_peers`` 1). InvalidRequest when
        ``num_peers`` < 1 or ``request_uuid`` is empty."""
        if num_peers < 1:
            raise InvalidRequest(f"all_gather numPeers must be >= 1, got {num_peers}")
        if not request_uuid:
            raise InvalidRequest("all_gather needs a requestUuid (one per participant)")
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        r = self._rounds.setdefault(allocation_id, _Round(num_peers))
        old = r.waiters.pop(request_uuid, None)
        if old is not None and not old[1].done():
            old[1].set_exception(Conflict(
                f"all_gather of allocation {allocation_id}: another request with requestUuid "
                f"{request_uuid} joined in this one's place"))
        r.num_peers = num_peers  # as 0.38.1: the latest participant's count holds
        r.waiters[request_uuid] = (data, fut)
        if len(r.waiters) >= r.num_peers:
            del self._rounds[allocation_id]
            everything = [d for d, _ in r.waiters.values()]
            for _, f in r.waiters.values():
                if not f.done():
                    f.set_result(list(everything))
        return fut

    def leave(self, allocation_id: str, request_uuid: str, fut: asyncio.Future[list[Any]]) -> None:
        """Withdraw a participant that stopped waiting (it timed out, its client went away):
        its data no longer counts. Nothing when ``fut`` is no longer the one waiting."""
        r = self._rounds.get(allocation_id)
        if r is None or r.waiters.get(request_uuid, (None, None))[1] is not fut:
            return
        del r.waiters[request_uuid]
        if not r.waiters:
            del self._rounds[allocation_id]

    def close(self, allocation_id: str, reason: str) -> None:
        """The allocation ended: its waiters get Conflict saying ``reason``."""
        r = self._rounds.pop(allocation_id, None)
        for _, f in (r.waiters.values() if r is not None else ()):
            if not f.done():
                f.set_exception(Conflict(f"all_gather of allocation {allocation_id}: {reason}"))

    async def gather(self, allocation_id: str, request_uuid: str, num_peers: int, data: Any,
                     *, alive: Callable[[], bool], connected: Callable[[], bool] = lambda: True,
                     ) -> list[Any]:
        """Join and wait for the round's data. Asked every ``poll_s`` while waiting:
        ``alive``, whether the allocation still runs (False: :meth:`close`), and
        ``connected``, whether the asking client still waits (False: it leaves the round, so a
        participant that gave up is not counted; Conflict). Unavailable after ``timeout_s``;
        a cancelled waiter leaves the round."""
        fut = self.join(allocation_id, request_uuid, num_peers, data)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        try:
            while not fut.done():
                left = deadline - loop.time()
                if left <= 0:
                    have = len(self.waiting(allocation_id))
                    self.leave(allocation_id, request_uuid, fut)
                    raise Unavailable(TIMEOUT_MESSAGE.format(
                        alloc=allocation_id, have=have, want=num_peers, timeout=self.timeout_s))
                await asyncio.wait([fut], timeout=min(left, self.poll_s))
                if fut.done():
                    break
                if not alive():
                    self.close(allocation_id, "the allocation has ended")
                elif not connected():
                    raise Conflict(f"all_gather of allocation {allocation_id}: the client of "
                                   f"requestUuid {request_uuid} went away")
            return fut.result()
        finally:
            self.leave(allocation_id, request_uuid, fut)
