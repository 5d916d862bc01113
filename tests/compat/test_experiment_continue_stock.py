"""The stock ``det experiment continue`` (0.38.1's ``POST /api/v1/experiments/continue``)
against det-jupyter, on SQLite and PostgreSQL: a finished single-trial experiment trains on
to a longer ``searcher.max_length`` from its latest checkpoint; an experiment still running,
a completed search, an override that changes what cannot change, bad YAML and users without
the right to edit it are refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
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
from tests.conftest import backend_db_url
from tests.integration._exp import COUNTER, counter_config, training_steps, trial_log_text, trials

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}
PW = "Continue-Passw0rd"


@dataclass
class World:
    master: MasterProcess
    admin: Client
    project: int  # in a workspace where "viewer" may only look and "stranger" has no role


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    m = MasterProcess(tmp_path_factory.mktemp("continue-stock") / "master", db_url=backend_db_url(request)).start()
    try:
        admin = m.admin()
        ws = admin.post("/api/v1/workspaces", {"name": "continue-ws"})["workspace"]["id"]
        project = admin.post(f"/api/v1/workspaces/{ws}/projects",
                             {"name": "continue-p", "workspaceId": ws})["project"]["id"]
        roles = {r["name"]: r["roleId"] for r in admin.post("/api/v1/roles/search", {"limit": 100})["roles"]}
        for name in ("viewer", "stranger"):
            uid = admin.post("/api/v1/users", {"user": {"username": name, "active": True},
                                               "password": PW})["user"]["id"]
            if name == "viewer":
                admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [{
                    "userId": uid, "roleAssignment": {"role": {"roleId": roles["Viewer"]},
                                                      "scopeWorkspaceId": ws}}]})
        yield World(m, admin, project)
    finally:
        m.stop()


def _submit(w: World, length: Any, **searcher: Any) -> int:
    cfg = yaml.safe_load(counter_config(length=length, ckpt_every=3, sleep=0.01))
    cfg["searcher"] = {"name": "single", "metric": "validation_loss", **searcher}
    return create_experiment(w.admin, yaml.safe_dump(cfg), COUNTER, projectId=w.project)["experiment"]["id"]


def _det(det_env: Any, w: World, *argv: str, **who: str) -> Any:
    return det_env.det(list(argv), w.master.url, **(who or ADMIN))


def _refused(res: Any, *words: str) -> str:
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "Traceback" not in res.stderr, res.stderr
    for word in words:
        assert word in out, out
    return out


def _batches(exp: dict) -> int:
    return int(exp["config"]["searcher"]["max_length"]["batches"])


def test_continue_trains_on_from_the_latest_checkpoint(det_env: Any, world: World) -> None:
    w, c = world, world.admin
    exp_id = _submit(w, "searcher", max_length={"batches": 4})
    assert wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    first = c.get(f"/api/v1/experiments/{exp_id}")
    old_length = _batches(first)
    [trial] = trials(c, exp_id)
    steps_before = training_steps(c, trial["id"])
    assert steps_before == list(range(1, old_length + 1))  # the run went to the config's length
    latest = c.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    resumed_at = max(int(ck["metadata"]["steps_completed"]) for ck in latest)
    new_length = old_length + 5

    res = _det(det_env, w, "e", "continue", str(exp_id), "--config", f"searcher.max_length.batches={new_length}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Continued experiment {exp_id}" in res.stdout
    assert wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}) == "STATE_COMPLETED"

    after = c.get(f"/api/v1/experiments/{exp_id}")
    assert _batches(after) == new_length
    assert after["experiment"]["progress"] == pytest.approx(1.0)
    assert yaml.safe_load(after["experiment"]["originalConfig"]) == \
        yaml.safe_load(first["experiment"]["originalConfig"])  # only the active config changes
    [again] = trials(c, exp_id)
    assert again["id"] == trial["id"] and again["state"] == "STATE_COMPLETED"
    assert again["restarts"] == 0
    # Run 2 started at the checkpoint and reported on from there to the new length.
    assert training_steps(c, trial["id"]) == list(range(1, new_length + 1))
    logs = trial_log_text(c, trial["id"])
    assert f"run 2 starting at step {resumed_at}" in logs, logs[-2000:]
    assert "run 1 starting at step 0" in logs


def test_continue_refuses_what_it_cannot_do(det_env: Any, world: World) -> None:
    w, c = world, world.admin
    running = _submit(w, 10_000, max_length={"batches": 10_000})
    try:
        wait_experiment(c, running, {"STATE_ACTIVE", "STATE_RUNNING"})
        out = _refused(_det(det_env, w, "e", "continue", str(running)), "non terminal state")
        assert "'ACTIVE'" in out or "'RUNNING'" in out, out
    finally:
        c.post(f"/api/v1/experiments/{running}/kill")
    assert wait_experiment(c, running, {"STATE_CANCELED"}) == "STATE_CANCELED"

    # An override may not move it, nor change a single searcher's kind; bad YAML is a 400.
    _refused(_det(det_env, w, "e", "continue", str(running), "--config", "project=elsewhere"), "'project'")
    _refused(_det(det_env, w, "e", "continue", str(running), "--config", "searcher.name=random"),
             "single searcher type")
    for text, word in (("searcher: [", "parsing override config"), ("workspace: w", "'workspace'"),
                       ("- 1", "parsing override config")):
        with pytest.raises(ApiError) as err:
            c.post("/api/v1/experiments/continue", {"id": running, "overrideConfig": text})
        assert err.value.status == 400 and word in str(err.value.body), err.value
    assert c.get(f"/api/v1/experiments/{running}")["experiment"]["state"] == "STATE_CANCELED"  # unchanged

    # A viewer of its workspace sees it but may not edit it (403); a stranger does not see it (404).
    for name, status in (("viewer", 403), ("stranger", 404)):
        _refused(_det(det_env, w, "e", "continue", str(running), user=name, password=PW))
        with pytest.raises(ApiError) as err:
            Client(w.master.url, w.master.login(name, PW)).post("/api/v1/experiments/continue", {"id": running})
        assert err.value.status == status, (name, err.value)
    with pytest.raises(ApiError) as err:
        c.post("/api/v1/experiments/continue", {"id": 999_999})
    assert err.value.status == 404


def test_a_completed_search_is_not_continued(det_env: Any, world: World) -> None:
    w, c = world, world.admin
    cfg = yaml.safe_load(counter_config(length=2, sleep=0.01, x={"type": "categorical", "vals": [1.0, 2.0]}))
    cfg["searcher"] = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 2}}
    exp_id = create_experiment(c, yaml.safe_dump(cfg), COUNTER, projectId=w.project)["experiment"]["id"]
    assert wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    assert {t["state"] for t in trials(c, exp_id)} == {"STATE_COMPLETED"}
    _refused(_det(det_env, w, "e", "continue", str(exp_id)),
             "experiment has been completed, cannot continue this experiment")
    _refused(_det(det_env, w, "e", "continue", str(exp_id), "--config", "searcher.max_length.batches=4"),
             "override config is provided and experiment is not single searcher")
    assert c.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == "STATE_COMPLETED"


def test_a_search_with_a_failed_trial_reruns_only_that_trial(det_env: Any, world: World) -> None:
    w, c = world, world.admin
    cfg = yaml.safe_load(counter_config(length=3, sleep=0.01, max_restarts=0, crash_runs="1",
                                        crash_at={"type": "categorical", "vals": [-1, 2]}))
    cfg["searcher"] = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 3}}
    exp_id = create_experiment(c, yaml.safe_dump(cfg), COUNTER, projectId=w.project)["experiment"]["id"]
    wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
    before = {t["id"]: t for t in trials(c, exp_id)}
    failed = [t["id"] for t in before.values() if t["state"] == "STATE_ERROR"]
    assert len(failed) == 1 and len(before) == 2, before  # its first run crashed, with no restarts left
    ended = {tid: t["endTime"] for tid, t in before.items()}

    res = _det(det_env, w, "e", "continue", str(exp_id))
    assert res.returncode == 0, res.stdout + res.stderr
    assert wait_experiment(c, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}) == "STATE_COMPLETED"
    after = {t["id"]: t for t in trials(c, exp_id)}
    assert set(after) == set(before)  # no trial was added
    assert {t["state"] for t in after.values()} == {"STATE_COMPLETED"}
    [other] = set(after) - set(failed)
    assert after[other]["endTime"] == ended[other]  # the completed one did not run again
    length = _batches(c.get(f"/api/v1/experiments/{exp_id}"))
    assert training_steps(c, failed[0]) == list(range(1, length + 1))
    assert "run 2 starting at step" in trial_log_text(c, failed[0])
