"""The stock CLI administers our cluster: ``det job update``, ``det e set``, agents and slots.

Each command must exit 0 (or fail with our message) and change what the master reports over
REST. The master has three pools: ``default`` (priority, the embedded agent's 2 slots),
``idle`` (priority, no agent: its jobs wait forever, so nothing runs) and ``fair``
(fair_share, no agent). 0.38.1's CLI has no ``det resource-pool list``; ``det job list`` reads
``GET /api/v1/resource-pools`` to title its column Priority or Weight, which is checked here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, Client, MasterProcess, create_experiment, wait_for
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}
MASTER_YAML = {
    "resource_manager": {"default_compute_resource_pool": "default"},
    "resource_pools": [
        {"pool_name": "default"},
        {"pool_name": "idle", "description": "no agents"},
        {"pool_name": "fair", "scheduler": {"type": "fair_share"}},
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("cluster-cli")
    config = root / "master.yaml"
    config.write_text(yaml.safe_dump(MASTER_YAML))
    m = MasterProcess(root / "master", slots=2, extra_args=["--config", str(config)]).start()
    yield m
    m.stop()


def _submit(client: Client, name: str, pool: str, **hp: Any) -> dict:
    cfg = yaml.safe_load(counter_config(**hp))
    cfg["name"] = name
    cfg["resources"] = {"resource_pool": pool}
    return create_experiment(client, yaml.safe_dump(cfg), COUNTER)["experiment"]


def _job(client: Client, pool: str, job_id: str) -> dict:
    jobs = client.get(f"/api/v1/job-queues-v2?resourcePool={pool}")["jobs"]
    return next(j["full"] for j in jobs if j["full"]["jobId"] == job_id)


def _config(client: Client, exp_id: int) -> dict:
    return client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["config"]


def _table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a ``tabulate`` table the CLI printed."""
    lines = [ln for ln in stdout.splitlines() if "|" in ln]
    cells = [[c.strip() for c in ln.split("|")] for ln in lines]
    return cells[0], cells[1:]


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    return res.stdout


def test_det_job_update_and_job_list(det_env, cluster: MasterProcess) -> None:
    client = cluster.admin()
    waiting = _submit(client, "waits", "idle")
    weighed = _submit(client, "weighed", "fair")
    job = waiting["jobId"]
    wait_for(lambda: _job(client, "idle", job), what="the job queued in pool idle")

    _ok(det_env.det(["job", "update", job, "--priority", "7"], cluster.url, **ADMIN))
    assert _job(client, "idle", job)["priority"] == 7
    header, rows = _table(_ok(det_env.det(["job", "list", "-p", "idle"], cluster.url, **ADMIN)))
    assert header[4] == "Priority"
    row = next(r for r in rows if r[1] == job)
    assert (row[4], row[7]) == ("7", "STATE_QUEUED"), row

    # A weight means nothing to a priority pool: refused, with the reason, and nothing changes.
    res = det_env.det(["job", "update", job, "--weight", "2"], cluster.url, **ADMIN)
    assert res.returncode != 0 and "ignores weight" in res.stdout + res.stderr, res
    assert _job(client, "idle", job)["weight"] == 1

    _ok(det_env.det(["job", "update", weighed["jobId"], "--weight", "4"], cluster.url, **ADMIN))
    assert _job(client, "fair", weighed["jobId"])["weight"] == 4
    header, rows = _table(_ok(det_env.det(["job", "list", "-p", "fair"], cluster.url, **ADMIN)))
    assert header[4] == "Weight"
    assert next(r for r in rows if r[1] == weighed["jobId"])[4] == "4"

    pools = client.get("/api/v1/resource-pools")
    det_env.check_shape("v1GetResourcePoolsResponse", pools)
    assert {p["name"]: p["schedulerType"] for p in pools["resourcePools"]} == {
        "default": "SCHEDULER_TYPE_PRIORITY", "idle": "SCHEDULER_TYPE_PRIORITY",
        "fair": "SCHEDULER_TYPE_FAIR_SHARE"}
    for exp in (waiting, weighed):
        client.post(f"/api/v1/experiments/{exp['id']}/kill")


def test_det_experiment_set_priority_weight_and_max_slots(det_env, cluster: MasterProcess) -> None:
    client = cluster.admin()
    ranked = _submit(client, "ranked", "idle")
    shared = _submit(client, "shared", "fair")
    wait_for(lambda: _job(client, "fair", shared["jobId"]), what="the job queued in pool fair")

    out = _ok(det_env.det(["e", "set", "priority", str(ranked["id"]), "10"], cluster.url, **ADMIN))
    assert f"Set `priority` of experiment {ranked['id']} to 10" in out
    assert _job(client, "idle", ranked["jobId"])["priority"] == 10
    assert _config(client, ranked["id"])["resources"]["priority"] == 10

    _ok(det_env.det(["e", "set", "weight", str(shared["id"]), "2.5"], cluster.url, **ADMIN))
    assert _job(client, "fair", shared["jobId"])["weight"] == 2.5
    assert _config(client, shared["id"])["resources"]["weight"] == 2.5

    _ok(det_env.det(["e", "set", "max-slots", str(shared["id"]), "3"], cluster.url, **ADMIN))
    assert _config(client, shared["id"])["resources"]["max_slots"] == 3
    for exp in (ranked, shared):
        client.post(f"/api/v1/experiments/{exp['id']}/kill")


def _agent(client: Client) -> dict:
    return client.get("/api/v1/agents")["agents"][0]


def test_det_agent_list_disable_drain_and_enable(det_env, cluster: MasterProcess) -> None:
    client = cluster.admin()
    agent_id = _agent(client)["id"]
    listed = json.loads(_ok(det_env.det(["agent", "list", "--json"], cluster.url, **ADMIN)))
    assert [(a["id"], a["num_slots"], a["resource_pools"], a["enabled"], a["draining"])
            for a in listed] == [(agent_id, 2, "default", True, False)]

    busy = _submit(client, "busy", "default", length=1000, sleep=0.05)
    wait_for(lambda: _job(client, "default", busy["jobId"])["allocatedSlots"] == 1,
             what="a trial on the agent")
    try:
        out = _ok(det_env.det(["agent", "disable", "--drain", agent_id], cluster.url, **ADMIN))
        assert "Tasks still in progress on draining nodes." in out
        got = _agent(client)
        assert (got["enabled"], got["draining"]) == (False, True)
        # Draining lets the trial run on.
        assert _job(client, "default", busy["jobId"])["allocatedSlots"] == 1

        _ok(det_env.det(["agent", "enable", agent_id], cluster.url, **ADMIN))
        got = _agent(client)
        assert (got["enabled"], got["draining"]) == (True, False)
    finally:
        client.post(f"/api/v1/agents/{agent_id}/enable")
        client.post(f"/api/v1/experiments/{busy['id']}/kill")


def test_det_slot_list_disable_and_enable(det_env, cluster: MasterProcess) -> None:
    client = cluster.admin()
    agent_id = _agent(client)["id"]

    def slots_listed() -> dict[str, bool]:
        rows = json.loads(_ok(det_env.det(["slot", "list", "--json"], cluster.url, **ADMIN)))
        assert all(r["agent_id"] == agent_id and r["resource_pools"] == "default" for r in rows)
        return {r["slot_id"]: r["enabled"] for r in rows}

    assert slots_listed() == {"0": True, "1": True}
    try:
        out = _ok(det_env.det(["slot", "disable", agent_id, "1"], cluster.url, **ADMIN))
        assert f"Disabled slot 1 of agent {agent_id}" in out
        assert {k: s["enabled"] for k, s in _agent(client)["slots"].items()} == {"0": True, "1": False}
        assert slots_listed() == {"0": True, "1": False}

        _ok(det_env.det(["slot", "enable", agent_id, "1"], cluster.url, **ADMIN))
        assert {k: s["enabled"] for k, s in _agent(client)["slots"].items()} == {"0": True, "1": True}
        assert slots_listed() == {"0": True, "1": True}
    finally:
        client.post(f"/api/v1/agents/{agent_id}/slots/1/enable")


def test_unknown_agent_and_slot_are_named_in_the_error(det_env, cluster: MasterProcess) -> None:
    res = det_env.det(["agent", "disable", "--drain", "no-such-agent"], cluster.url, **ADMIN)
    assert res.returncode != 0 and "agent no-such-agent is not connected" in res.stdout + res.stderr
    agent_id = _agent(cluster.admin())["id"]
    res = det_env.det(["slot", "disable", agent_id, "9"], cluster.url, **ADMIN)
    assert res.returncode != 0 and f"agent {agent_id} has no slot 9" in res.stdout + res.stderr

