"""The stock ``det resource-pool bindings``, ``det workspace list-pools``, ``det resources`` and
``det config-policies`` (and the SDK's ``ResourcePool``) against det-jupyter: bindings restrict
submissions, usage counts a finished experiment's allocation, policies refuse past their limits,
non-admins are refused."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests._master import (
    ADMIN_PASSWORD,
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
)
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}
MASTER_YAML = {
    "resource_manager": {"default_compute_resource_pool": "default"},
    "resource_pools": [{"pool_name": "default"}, {"pool_name": "private"}],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("pools-stock")
    (root / "master.yaml").write_text(yaml.safe_dump(MASTER_YAML))
    m = MasterProcess(
        root / "master", slots=2, extra_args=["--config", str(root / "master.yaml")]
    ).start()
    yield m
    m.stop()


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert "Traceback" not in res.stderr
    return res.stdout


def _refused(res: Any, *words: str) -> str:
    assert res.returncode != 0, res.stdout
    assert "Traceback" not in res.stderr
    for w in words:
        assert w in res.stderr + res.stdout, res.stderr
    return res.stderr


def _project(client: Client, ws_name: str) -> int:
    wid = client.post("/api/v1/workspaces", {"name": ws_name})["workspace"]["id"]
    return client.post(
        f"/api/v1/workspaces/{wid}/projects", {"name": f"{ws_name}-p", "workspaceId": wid}
    )["project"]["id"]


def _submit(client: Client, project_id: int, **resources: Any) -> dict:
    cfg = yaml.safe_load(counter_config())
    cfg["resources"] = resources
    return create_experiment(client, yaml.safe_dump(cfg), COUNTER, projectId=project_id)


def test_bindings_restrict_submissions(det_env, cluster: MasterProcess) -> None:
    c = cluster.admin()
    p_a, p_b = _project(c, "ws-a"), _project(c, "ws-b")

    def det(*argv: str) -> Any:
        return det_env.det(list(argv), cluster.url, **ADMIN)

    _ok(det("resource-pool", "bindings", "add", "private", "ws-a"))
    assert "ws-a" in _ok(det("resource-pool", "bindings", "list-workspaces", "private"))
    _refused(
        det("resource-pool", "bindings", "add", "default", "ws-b"), "default resource pool default"
    )
    _refused(det("resource-pool", "bindings", "add", "nope", "ws-b"), "nope")
    listed_b = _ok(det("workspace", "list-pools", "ws-b"))
    assert "default" in listed_b and "private" not in listed_b
    assert "private" in _ok(det("workspace", "list-pools", "ws-a"))

    with pytest.raises(ApiError) as err:
        _submit(c, p_b, resource_pool="private")
    assert (
        err.value.status == 400
        and "private" in str(err.value.body)
        and "ws-b" in str(err.value.body)
    )
    assert _submit(c, p_a, resource_pool="private")["experiment"]["id"] > 0

    # the SDK: replace, list, remove
    out = det_env.run_python(
        "from determined.experimental import client\n"
        f"client.login({cluster.url!r}, 'admin', {ADMIN_PASSWORD!r})\n"
        "from determined.common.experimental import resource_pool\n"
        "rp = resource_pool.ResourcePool(client._determined._session, 'private')\n"
        "rp.replace_bindings(['ws-b'])\n"
        "print(len(rp.list_workspaces()))\n"  # 0.38.1's SDK leaves the names unloaded (None)
        "rp.remove_bindings(['ws-b'])\n"
        "print(len(rp.list_workspaces()))\n"
        "print(sorted(p.name for p in client.get_workspace('ws-b').list_pools()))\n"
    )
    assert "1\n0\n['default', 'private']" in out.stdout, out.stderr
    assert _submit(c, p_b, resource_pool="private")["experiment"]["id"] > 0  # unbound: open to all

    # non-admins cannot bind
    c.post(
        "/api/v1/users",
        {"user": {"username": "pooluser", "active": True}, "password": "Pool-pass-1"},
    )
    _refused(
        det_env.det(
            ["resource-pool", "bindings", "add", "private", "ws-b"],
            cluster.url,
            user="pooluser",
            password="Pool-pass-1",
        )
    )
    for exp in c.get("/api/v1/experiments")["experiments"]:
        c.post(f"/api/v1/experiments/{exp['id']}/kill")


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_resources_count_a_finished_experiment(det_env, cluster: MasterProcess) -> None:
    c = cluster.admin()
    exp_id = create_experiment(c, counter_config(), COUNTER)["experiment"]["id"]
    assert (
        wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=60)
        == "STATE_COMPLETED"
    )
    trials = c.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    start = dt.datetime.fromisoformat(trials[0]["startTime"].replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(trials[0]["endTime"].replace("Z", "+00:00"))
    after = (start - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = (end + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def det(*argv: str) -> str:
        return _ok(det_env.det(list(argv), cluster.url, **ADMIN))

    raw = [
        r for r in _csv(det("resources", "raw", after, before)) if r["experiment_id"] == str(exp_id)
    ]
    assert len(raw) == 1 and raw[0]["username"] == "admin" and raw[0]["slots"] == "1"
    a_start = dt.datetime.fromisoformat(raw[0]["start_time"].replace("Z", "+00:00"))
    a_end = dt.datetime.fromisoformat(raw[0]["end_time"].replace("Z", "+00:00"))
    # the allocation ran inside the trial's lifetime; its seconds are its own span
    assert start - dt.timedelta(seconds=1) <= a_start <= a_end <= end + dt.timedelta(seconds=1)
    secs = (a_end - a_start).total_seconds()
    assert float(raw[0]["seconds"]) == pytest.approx(secs, abs=0.01)

    allocs = [
        r
        for r in _csv(det("resources", "allocations", after, before))
        if r["experiment_id"] == str(exp_id)
    ]
    assert len(allocs) == 1 and float(allocs[0]["slot_hours"]) == pytest.approx(
        secs / 3600, abs=1e-5
    )
    assert allocs[0]["resource_pool"] == "default"

    day = a_start.strftime("%Y-%m-%d")
    agg = _csv(det("resources", "aggregated", day, day))
    if a_start.date() == a_end.date():
        mine = [
            r
            for r in agg
            if r["aggregation_type"] == "username" and r["aggregation_key"] == "admin"
        ]
        assert float(mine[0]["seconds"]) >= secs - 0.01
    total = [r for r in agg if r["aggregation_type"] == "total"]
    assert [r["date"] for r in total] == [day]

    _refused(det_env.det(["resources", "raw", "yesterday", before], cluster.url, **ADMIN))
    with pytest.raises(ApiError) as err:
        Client(cluster.url, cluster.login("pooluser", "Pool-pass-1")).get(
            f"/resources/allocation/raw?timestamp_after={after}&timestamp_before={before}"
        )
    assert err.value.status in (403, 404)


def test_config_policies(det_env, cluster: MasterProcess, tmp_path) -> None:
    c = cluster.admin()
    p = _project(c, "ws-pol")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "constraints": {"resource_constraints": {"max_slots": 1}},
                "invariant_config": {"description": "policy says so"},
            }
        )
    )

    def det(*argv: str) -> str:
        return _ok(det_env.det(list(argv), cluster.url, **ADMIN))

    assert "max_slots: 1" in det(
        "config-policies", "set", "experiment", str(policy), "-w", "ws-pol"
    )
    shown = json.loads(det("config-policies", "describe", "experiment", "-w", "ws-pol", "--json"))
    assert shown["constraints"]["resource_constraints"]["max_slots"] == 1
    with pytest.raises(ApiError) as err:
        _submit(c, p, slots_per_trial=2)
    assert err.value.status == 400 and "max_slots of 1" in str(err.value.body)
    exp = _submit(c, p, slots_per_trial=1)["experiment"]
    assert (
        c.get(f"/api/v1/experiments/{exp['id']}")["experiment"]["config"]["description"]
        == "policy says so"
    )
    c.post(f"/api/v1/experiments/{exp['id']}/kill")

    bad = tmp_path / "bad.yaml"
    bad.write_text("constraints: {priority_limit: 500}\n")
    _refused(
        det_env.det(["config-policies", "set", "experiment", str(bad)], cluster.url, **ADMIN),
        "priority_limit",
    )
    det("config-policies", "delete", "experiment", "-w", "ws-pol")
    assert _submit(c, p, slots_per_trial=2)["experiment"]["id"] > 0
    _refused(
        det_env.det(
            ["config-policies", "set", "experiment", str(policy)],
            cluster.url,
            user="pooluser",
            password="Pool-pass-1",
        )
    )
