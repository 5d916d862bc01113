"""services.allocation.all_gather: rounds of numPeers distinct participants per allocation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from det_jupyter.errors import Conflict, InvalidRequest, Unavailable
from det_jupyter.services.allocation.all_gather import AllGathers


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_one_participant_is_answered_at_once() -> None:
    async def go() -> None:
        g = AllGathers()
        fut = g.join("a", "u1", 1, {"x": 1})
        assert fut.done() and fut.result() == [{"x": 1}]
        assert g.waiting("a") == []
    run(go())


def test_every_participant_gets_all_the_data_in_arrival_order() -> None:
    async def go() -> None:
        g = AllGathers()
        f1 = g.join("a", "u1", 3, "one")
        f2 = g.join("a", "u2", 3, "two")
        other = g.join("b", "u9", 2, "elsewhere")  # another allocation: its own round
        assert not f1.done() and not f2.done() and g.waiting("a") == ["u1", "u2"]
        f3 = g.join("a", "u3", 3, "three")
        assert [f.result() for f in (f1, f2, f3)] == [["one", "two", "three"]] * 3
        assert not other.done() and g.waiting("b") == ["u9"]
        # The next request starts a new round.
        f4 = g.join("a", "u1", 2, "again")
        assert not f4.done() and g.waiting("a") == ["u1"]
    run(go())


def test_a_repeated_request_uuid_replaces_the_waiting_one() -> None:
    async def go() -> None:
        g = AllGathers()
        old = g.join("a", "u1", 2, "first try")
        new = g.join("a", "u1", 2, "retry")
        assert isinstance(old.exception(), Conflict)
        assert not new.done() and g.waiting("a") == ["u1"]
        peer = g.join("a", "u2", 2, "peer")
        assert new.result() == peer.result() == ["retry", "peer"]
    run(go())


@pytest.mark.parametrize("num_peers, uuid", [(0, "u"), (-1, "u"), (2, "")])
def test_invalid_requests_are_refused(num_peers: int, uuid: str) -> None:
    async def go() -> None:
        with pytest.raises(InvalidRequest):
            AllGathers().join("a", uuid, num_peers, None)
    run(go())


@pytest.mark.parametrize("timeout_s, poll_s", [(0, 1), (1, 0)])
def test_settings_are_validated(timeout_s: float, poll_s: float) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        AllGathers(timeout_s=timeout_s, poll_s=poll_s)


def test_gather_waits_for_its_peers() -> None:
    async def go() -> list[Any]:
        g = AllGathers(timeout_s=5, poll_s=0.01)
        return list(await asyncio.gather(
            g.gather("a", "u1", 2, 1, alive=lambda: True),
            g.gather("a", "u2", 2, 2, alive=lambda: True)))
    assert run(go()) == [[1, 2], [1, 2]]


def test_a_waiter_times_out_with_a_clear_error_and_leaves_the_round() -> None:
    async def go() -> None:
        g = AllGathers(timeout_s=0.05, poll_s=0.01)
        with pytest.raises(Unavailable, match=r"1 of 2 peers connected within 0.05 s"):
            await g.gather("a", "u1", 2, "lonely", alive=lambda: True)
        assert g.waiting("a") == []
        # A later pair is not answered with the timed-out one's data.
        got = await asyncio.gather(g.gather("a", "u2", 2, "b", alive=lambda: True),
                                   g.gather("a", "u3", 2, "c", alive=lambda: True))
        assert got == [["b", "c"], ["b", "c"]]
    run(go())


def test_waiters_of_an_ended_allocation_get_an_error() -> None:
    async def go() -> None:
        g = AllGathers(timeout_s=5, poll_s=0.01)
        live = [True]
        waiter = asyncio.ensure_future(g.gather("a", "u1", 2, "x", alive=lambda: live[0]))
        await asyncio.sleep(0.03)
        assert not waiter.done()
        live[0] = False
        with pytest.raises(Conflict, match="the allocation has ended"):
            await waiter
        assert g.waiting("a") == []
    run(go())


def test_close_fails_every_waiter_of_that_allocation_only() -> None:
    async def go() -> None:
        g = AllGathers()
        f1, f2 = g.join("a", "u1", 3, 1), g.join("a", "u2", 3, 2)
        f3 = g.join("b", "u1", 2, 3)
        g.close("a", "killed")
        assert all(isinstance(f.exception(), Conflict) for f in (f1, f2))
        assert "killed" in str(f1.exception()) and not f3.done()
    run(go())


def test_a_client_that_went_away_is_not_counted() -> None:
    async def go() -> None:
        g = AllGathers(timeout_s=5, poll_s=0.01)
        gone = [False]
        first = asyncio.ensure_future(g.gather("a", "u1", 2, "dead", alive=lambda: True,
                                               connected=lambda: not gone[0]))
        await asyncio.sleep(0.02)
        gone[0] = True
        with pytest.raises(Conflict, match="went away"):
            await first
        assert g.waiting("a") == []
        second = g.join("a", "u2", 2, "live")
        assert not second.done()
    run(go())


def test_a_cancelled_waiter_leaves_the_round() -> None:
    async def go() -> None:
        g = AllGathers(timeout_s=5, poll_s=0.01)
        waiter = asyncio.ensure_future(g.gather("a", "u1", 2, "x", alive=lambda: True))
        await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert g.waiting("a") == []
    run(go())
