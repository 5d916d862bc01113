"""The webhook shipper (services._webhook_shipper) against a loopback receiver: signed POSTs,
retries of 5xx and unreachable receivers with backoff, 4xx final, a full queue dropping."""

from __future__ import annotations

import time

from det_jupyter.services.webhooks._shipper import Delivery, Shipper
from tests.integration._webhook_receiver import Receiver, assert_signed


def _shipper(**kw: object) -> Shipper:
    return Shipper(lambda: "k3y", first_backoff_s=0.05, timeout_s=5.0, **kw)  # type: ignore[arg-type]


def test_a_5xx_is_retried_until_it_lands_and_each_try_is_signed() -> None:
    with Receiver((502, 503, 200)) as rx:
        assert _shipper().deliver(Delivery(rx.url, b'{"a":1}', "w1")) is True
        assert len(rx.got) == 3 and {r.body for r in rx.got} == {b'{"a":1}'}
    for r in rx.got:
        assert_signed("k3y", r)
    assert rx.got[1].at - rx.got[0].at >= 0.045 and rx.got[2].at - rx.got[1].at >= 0.095  # 0.05 s, then 0.1 s


def test_tries_are_spent_and_a_4xx_is_final() -> None:
    with Receiver((500,)) as down, Receiver((410,)) as gone:
        assert _shipper(attempts=4).deliver(Delivery(down.url, b"{}", "w2")) is False
        assert _shipper().deliver(Delivery(gone.url, b"{}", "w3")) is False
        assert len(down.got) == 4 and len(gone.got) == 1
    assert _shipper().deliver(Delivery("http://127.0.0.1:9/none", b"{}", "w4")) is False


def test_unsigned_deliveries_carry_no_signature() -> None:
    with Receiver() as rx:
        assert _shipper().deliver(Delivery(rx.url, b"{}", "w5", signed=False))
    assert "x-determined-ai-signature" not in rx.got[0].headers


def test_senders_deliver_in_the_background_and_a_full_queue_drops() -> None:
    with Receiver() as rx:
        s = _shipper(workers=2, max_queue=2)
        assert s.submit(Delivery(rx.url, b"1", "a")) and s.submit(Delivery(rx.url, b"2", "b"))
        assert not s.submit(Delivery(rx.url, b"3", "c"))  # not started yet: the queue is full
        s.start()
        rx.wait(2, timeout=10)
        s.stop()
        assert not s.submit(Delivery(rx.url, b"4", "d"))  # stopped
        time.sleep(0.2)
    assert sorted(r.body for r in rx.got) == [b"1", b"2"]
