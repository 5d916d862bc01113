"""The stock ``det experiment set log-retention`` and ``det task cleanup-logs`` against
det-jupyter: an ended trial's logs go once their retention has passed (set per experiment, or
by the config's ``retention_policy``); others stay; only admins clean up."""

from __future__ import annotations

from collections.abc import Iterator

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
PW = "Retain-Passw0rd"
ENDED = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("retain") / "master").start()
    yield m
    m.stop()


def _lines(client: Client, trial_id: int) -> int:
    got = client.get(f"/api/v1/trials/{trial_id}/logs")
    return len(got if isinstance(got, list) else [got] if got else [])


def _run(client: Client, project: int, **extra: object) -> tuple[int, int]:
    cfg = yaml.safe_load(counter_config(length=3, sleep=0.01))
    cfg.update(extra)
    exp_id = create_experiment(client, yaml.safe_dump(cfg), COUNTER, projectId=project)["experiment"]["id"]
    return exp_id, client.get(f"/api/v1/experiments/{exp_id}/trials")["trials"][0]["id"] if \
        wait_experiment(client, exp_id, ENDED) == "STATE_COMPLETED" else -1


def test_set_log_retention_and_cleanup(det_env, master: MasterProcess) -> None:
    admin = master.admin()
    ws = admin.post("/api/v1/workspaces", {"name": "retain-ws"})["workspace"]["id"]
    project = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "retain-p", "workspaceId": ws})["project"]["id"]
    (a, ta), (b, tb) = _run(admin, project), _run(admin, project)
    d, td = _run(admin, project, retention_policy={"log_retention_days": 0})
    assert min(ta, tb, td) > 0
    before = {t: _lines(admin, t) for t in (ta, tb, td)}
    assert min(before.values()) > 0, before

    def det(*argv: str, user: str = "admin", password: str = ADMIN_PASSWORD):  # noqa: ANN202
        res = det_env.det(list(argv), master.url, user=user, password=password)
        assert "Traceback" not in res.stderr
        return res

    long_cfg = yaml.safe_load(counter_config(length=2000, sleep=0.05))
    running = create_experiment(admin, yaml.safe_dump(long_cfg), COUNTER, projectId=project)["experiment"]["id"]
    refused = det("e", "set", "log-retention", str(running), "--days", "0")
    assert refused.returncode != 0 and "non terminal state" in refused.stderr
    admin.post(f"/api/v1/experiments/{running}/kill")

    assert det("e", "set", "log-retention", str(a), "--days", "0").returncode == 0
    assert admin.get(f"/api/v1/experiments/{a}")["config"]["retention_policy"]["log_retention_days"] == 0
    with pytest.raises(ApiError) as err:
        admin.request("PUT", f"/api/v1/experiments/{a}/retain_logs", {"experimentId": a, "numDays": 40000})
    assert err.value.status == 400 and "numDays" in str(err.value.body)

    admin.post("/api/v1/users", {"user": {"username": "retain-user", "active": True}, "password": PW})
    denied = det("task", "cleanup-logs", user="retain-user", password=PW)
    assert denied.returncode != 0 and _lines(admin, ta) == before[ta]
    outsider = det("e", "set", "log-retention", str(b), "--days", "0", user="retain-user", password=PW)
    assert outsider.returncode != 0 and "not found" in outsider.stderr

    # b's experiment set to 0 days, then its trial to forever (as 0.38.1, each setting writes
    # the trial's days; the later one holds): b's logs stay.
    assert det("e", "set", "log-retention", str(b), "--days", "0").returncode == 0
    assert det("trial", "set", "log-retention", str(tb), "--forever").returncode == 0
    denied_t = det("trial", "set", "log-retention", str(tb), "--days", "0", user="retain-user", password=PW)
    assert denied_t.returncode != 0 and "not found" in denied_t.stderr

    done = det("task", "cleanup-logs")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Deleted {before[ta] + before[td]} rows of log entries."
    assert (_lines(admin, ta), _lines(admin, td), _lines(admin, tb)) == (0, 0, before[tb])
    assert det("task", "cleanup-logs").stdout.strip() == "Deleted 0 rows of log entries."
