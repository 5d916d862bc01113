"""Replayed secrets in the ``commands`` table, on both backends: rows written before sealing
(a notebook's upstream token, a shell's private key in plain text) still work and are sealed
at the master's start; nothing new is stored in plain text."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from det_jupyter.services.common.sealed import Sealer, is_sealed
from det_jupyter.services.interactive.commands import CommandService
from det_jupyter.services.interactive.ssh import PRIVATE_KEY, generate_key_pair
from det_jupyter.store import _tables as t
from tests.contract._rows import NOW, make_user

TOKEN = "5eed" * 12
KEY = bytes(range(32))


def _old_task(engine: sa.Engine, owner: int, task_id: str, kind: str, config: dict,
              token: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(t.jobs).values(
            job_id=f"job-{task_id}", job_type=kind, owner_id=owner, priority=42, weight=1.0,
            resource_pool="default", queue_position=NOW, submitted_at=NOW))
        conn.execute(sa.insert(t.commands).values(
            task_id=task_id, job_id=f"job-{task_id}", owner_id=owner, description=task_id,
            config=config, start_time=NOW, task_type=kind, proxy_token=token,
            proxy_address="127.0.0.1:9"))


def _row(engine: sa.Engine, task_id: str) -> sa.Row:
    with engine.connect() as conn:
        return conn.execute(sa.select(t.commands).where(t.commands.c.task_id == task_id)).one()


def test_plain_text_rows_still_work_and_are_sealed_at_start(engine, clock) -> None:
    owner = make_user(engine)
    private, public = generate_key_pair("old")
    _old_task(engine, owner, "nb-old", "NOTEBOOK", {"idle_timeout": None}, TOKEN)
    _old_task(engine, owner, "sh-old", "SHELL",
              {"idle_timeout": None, PRIVATE_KEY: private, "ssh_public_key": public}, TOKEN[::-1])
    _old_task(engine, owner, "cmd", "COMMAND", {"entrypoint": "true"}, None)
    commands = CommandService(engine, clock, None, None, sealer=Sealer(KEY))  # type: ignore[arg-type]
    before = _row(engine, "nb-old")
    assert commands.upstream_token(before) == TOKEN  # read as it is, before sealing

    assert commands.seal_plaintext() == 2
    nb, sh = _row(engine, "nb-old"), _row(engine, "sh-old")
    assert is_sealed(nb.proxy_token) and is_sealed(sh.proxy_token)
    assert is_sealed(sh.config[PRIVATE_KEY]) and sh.config["ssh_public_key"] == public
    assert commands.upstream_token(nb) == TOKEN and commands.upstream_token(sh) == TOKEN[::-1]
    assert commands.private_key(sh) == private
    assert commands.seal_plaintext() == 0  # nothing left in plain text

    if engine.dialect.name == "sqlite":  # secure_delete: the old bytes are gone from the file
        engine.dispose()  # the last connection checkpoints the WAL into the file
        path = Path(engine.url.database or "")
        data = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert TOKEN.encode() not in data and TOKEN[::-1].encode() not in data
        assert private.splitlines()[1].encode() not in data
