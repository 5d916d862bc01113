"""The cluster-wide message on both stores, as 0.38.1 keeps it: one at a time, the newest
counts, setting one ends the one before, clearing ends it, and a bad one changes nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.cluster.messages import MAX_LENGTH, ClusterMessages
from det_jupyter.services.common.clock import FakeClock
from tests.contract._rows import make_user


def test_a_message_is_shown_from_its_start_until_its_end(engine: sa.Engine, clock: FakeClock) -> None:
    msgs = ClusterMessages(engine, clock)
    admin = make_user(engine, "root", admin=True)
    assert msgs.current() is None and msgs.active() is None
    now = clock.now()
    msgs.set(admin, "maintenance at five", start_time=now + 60, end_time=None, duration="1h")
    current = msgs.current()
    assert current is not None and current.message == "maintenance at five"
    assert current.end_time == pytest.approx(now + 60 + 3600)
    assert msgs.active() is None  # set, not started yet
    clock.advance(61)
    assert msgs.active() is not None
    clock.advance(3600)
    assert msgs.current() is None and msgs.active() is None  # ended


def test_setting_a_message_ends_the_one_before_and_clearing_ends_it(engine: sa.Engine, clock: FakeClock) -> None:
    msgs = ClusterMessages(engine, clock)
    admin = make_user(engine, "root", admin=True)
    msgs.set(admin, "first", start_time=None, end_time=None, duration=None)
    clock.advance(1)
    msgs.set(admin, "second", start_time=None, end_time=None, duration=None)
    clock.advance(1)
    active = msgs.active()
    assert active is not None and active.message == "second"
    with engine.connect() as conn:
        ended = conn.execute(sa.text("SELECT message FROM cluster_messages WHERE end_time IS NOT NULL")).scalars().all()
    assert ended == ["first"]
    msgs.clear()
    clock.advance(1)
    assert msgs.current() is None and msgs.active() is None


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"message": "x" * (MAX_LENGTH + 1)}, "at most 250 characters"),
    ({"end_time": 10.0, "duration": "1h"}, "mutually exclusive"),
    ({"end_time": -5.0}, "after start time"),
    ({"start_time": -100.0, "end_time": -50.0}, "after the current time"),
    ({"duration": "5d"}, "unit of h, m, s"),
])
def test_a_bad_message_is_refused_and_the_current_one_stays(
        engine: sa.Engine, clock: FakeClock, kwargs: dict, error: str) -> None:
    msgs = ClusterMessages(engine, clock)
    admin = make_user(engine, "root", admin=True)
    msgs.set(admin, "kept", start_time=None, end_time=None, duration=None)
    clock.advance(1)
    args = {"message": "new", "start_time": None, "end_time": None, "duration": None, **kwargs}
    if args["end_time"] is not None and args["end_time"] < 0:
        args["end_time"] = clock.now() + args["end_time"]
    if args["start_time"] is not None:
        args["start_time"] = clock.now() + args["start_time"]
    with pytest.raises(InvalidRequest, match=error):
        msgs.set(admin, args.pop("message"), **args)
    active = msgs.active()
    assert active is not None and active.message == "kept"


def test_a_new_master_process_reads_the_message_its_predecessor_set(engine: sa.Engine, clock: FakeClock) -> None:
    """The message is kept in memory after the first read; a restarted master (a new service
    on the same database) still finds it, and finds a cleared one gone."""
    admin = make_user(engine, "root", admin=True)
    ClusterMessages(engine, clock).set(admin, "kept across restarts", start_time=None, end_time=None,
                                       duration=None)
    clock.advance(1)
    after_restart = ClusterMessages(engine, clock).active()
    assert after_restart is not None and after_restart.message == "kept across restarts"
    ClusterMessages(engine, clock).clear()
    clock.advance(1)
    assert ClusterMessages(engine, clock).current() is None
