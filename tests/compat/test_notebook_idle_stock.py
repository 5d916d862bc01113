"""A notebook's idle report as the stock client sends it: ``bindings.put_IdleNotebook`` (what
Determined's ``check_idle.py`` calls) over a ``TaskSession`` made by ``login_from_task`` from
the notebook's own environment (its ``DET_SESSION_TOKEN``, read by a cell in its kernel)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests._master import MasterProcess
from tests.integration import _notebooks as nbh

pytestmark = [pytest.mark.compat, pytest.mark.slow]

_STOCK = """
import json, sys
from determined.common import api
from determined.common.api import authentication, bindings

master, nb = sys.argv[1], sys.argv[2]
out = {}
session = authentication.login_from_task(master, None)
for name, idle, target in (("own", False, nb), ("own_idle", True, nb), ("other", False, "not-this-one")):
    try:
        bindings.put_IdleNotebook(session, body=bindings.v1IdleNotebookRequest(idle=idle, notebookId=target),
                                  notebookId=target)
        out[name] = "ok"
    except api.errors.APIException as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_the_stock_idle_report_from_a_notebook_task_is_accepted(det_env, master: MasterProcess) -> None:
    client = master.admin()
    nb = nbh.launch(client, resources={"slots": 0}, idle_timeout="10m")
    try:
        nbh.wait_running(client, nb)
        kernel = nbh.start_kernel(client, nb)
        url = nbh.ws_url(nbh.proxy_origin(client, nb), nb, kernel)
        cell = "import os, json; print(json.dumps([os.environ['DET_SESSION_TOKEN'], os.environ['DET_USER']]))"
        token, user = json.loads(asyncio.run(nbh.run_cell(
            url, {"Authorization": f"Bearer {client.token}"}, cell)).strip().splitlines()[-1])
        res = det_env.run_python(_STOCK, args=[master.url, nb],
                                 env_extra={"DET_SESSION_TOKEN": token, "DET_USER": user})
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out["own"] == "ok" and out["own_idle"] == "ok", out
        # The task's token reaches its own notebook only: any other id is not found.
        assert out["other"].startswith("NotFoundException"), out
        assert nbh.state(client, nb) == "STATE_RUNNING"
    finally:
        client.post(f"/api/v1/notebooks/{nb}/kill")
