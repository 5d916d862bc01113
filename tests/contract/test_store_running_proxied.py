"""``CommandService.running_proxied``: the proxy's once-a-second read, on both backends. Only
running tasks of the proxied kinds with an address, and the idle settings extracted from the
stored config by the database."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.interactive.commands import CommandService
from det_jupyter.store import _tables as t
from tests.contract._rows import NOW, make_user


def _task(engine: sa.Engine, owner: int, task_id: str, kind: str, state: str, config: dict,
          address: str | None = "127.0.0.1:9") -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(t.jobs).values(
            job_id=f"job-{task_id}", job_type=kind, owner_id=owner, priority=42, weight=1.0,
            resource_pool="default", queue_position=NOW, submitted_at=NOW))
        conn.execute(sa.insert(t.commands).values(
            task_id=task_id, job_id=f"job-{task_id}", owner_id=owner, description=task_id,
            config=config, start_time=NOW, task_type=kind, proxy_token="tok", proxy_address=address))
        conn.execute(sa.insert(t.allocations).values(
            allocation_id=f"{task_id}.1", task_id=task_id, state=state, slots=0,
            resource_pool="default", submitted_at=NOW, job_id=f"job-{task_id}"))


def test_running_proxied_reads_running_proxied_tasks_and_their_idle_settings(engine, clock) -> None:
    owner = make_user(engine)
    _task(engine, owner, "nb-idle", "NOTEBOOK", "RUNNING",
          {"idle_timeout": 1200.0, "notebook_idle_type": "activity", "work_dir": "/w"})
    _task(engine, owner, "nb-no-timeout", "NOTEBOOK", "RUNNING",
          {"idle_timeout": None, "notebook_idle_type": "kernels_or_terminals"})
    _task(engine, owner, "tb", "TENSORBOARD", "RUNNING", {"idle_timeout": 300})
    _task(engine, owner, "nb-pending", "NOTEBOOK", "PENDING", {"idle_timeout": 60.0})
    _task(engine, owner, "nb-no-address", "NOTEBOOK", "RUNNING", {"idle_timeout": 60.0}, address=None)
    _task(engine, owner, "cmd", "COMMAND", "RUNNING", {"idle_timeout": 60.0})
    rows = {r.task_id: r for r in CommandService(engine, clock, None, None).running_proxied()}  # type: ignore[arg-type]
    assert set(rows) == {"nb-idle", "nb-no-timeout", "tb"}
    assert (rows["nb-idle"].idle_timeout, rows["nb-idle"].idle_type) == (1200.0, "activity")
    assert rows["nb-idle"].allocation_id == "nb-idle.1" and rows["nb-idle"].owner_id == owner
    assert (rows["nb-idle"].proxy_address, rows["nb-idle"].proxy_token) == ("127.0.0.1:9", "tok")
    assert rows["nb-no-timeout"].idle_timeout is None
    assert rows["nb-no-timeout"].idle_type == "kernels_or_terminals"
    assert rows["tb"].idle_timeout == 300.0 and rows["tb"].idle_type is None


def test_a_tasks_own_report_moves_its_proxy_address_to_its_host_on_the_masters_port(engine, clock) -> None:
    owner = make_user(engine)
    _task(engine, owner, "nb", "NOTEBOOK", "RUNNING", {"idle_timeout": 60.0}, address="10.0.0.1:29400")
    _task(engine, owner, "nb-ended", "NOTEBOOK", "TERMINATED", {}, address="10.0.0.1:29500")
    commands = CommandService(engine, clock, None, None)  # type: ignore[arg-type]
    assert commands.report_proxy_address("nb", "nb.1", "10.244.0.7") == "10.244.0.7:29400"
    assert commands.report_proxy_address("nb", "nb.1", "10.244.0.7") is None  # the same: nothing to do
    assert commands.report_proxy_address("nb", "other.1", "10.9.9.9") is None  # not its allocation
    assert commands.report_proxy_address("nb-ended", "nb-ended.1", "10.9.9.9") is None
    assert commands.report_proxy_address("no-such-task", "x.1", "10.9.9.9") is None  # a trial
    with pytest.raises(InvalidRequest, match="proxyAddress must be a host"):
        commands.report_proxy_address("nb", "nb.1", "evil/path")
    (row,) = commands.running_proxied()
    assert row.proxy_address == "10.244.0.7:29400"
