"""Issue 27, logs: the stock CLI's filters (``det trial logs --level``, ``--stdtype``,
``--timestamp-after``; ``det task logs --rank-id``) and the SDK's ``searchText`` select lines
on the master, and a Python logging line printed to stderr keeps its own level (it was
always ERROR)."""

from __future__ import annotations

import urllib.parse

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


def _lines(client, trial_id: int, **query: object) -> list[dict]:
    qs = urllib.parse.urlencode(query, doseq=True)
    got = client.get(f"/api/v1/trials/{trial_id}/logs?{qs}")
    return [r["result"] for r in (got if isinstance(got, list) else [got] if got else [])]


def test_the_stock_log_filters_select_lines_on_the_master(det_env, master: MasterProcess) -> None:
    client = master.admin()
    exp_id = create_experiment(client, f.steps_config(det_env.python, name="logs", length=5, hparams={"log_levels": True}), f.STEPS_DIR)["experiment"]["id"]
    trial = f.only_trial(client, exp_id)
    assert f.wait_state(client, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    tid, task_id = trial["id"], trial["taskId"]

    every = f.log_lines(client, tid)
    # Python's logging with det.LOG_FORMAT, to stderr ("WARNING: [pid] root: ..."): each line
    # keeps its own level.
    logged = {ln["message"].split("LEVELLED ")[1].strip(): ln["level"] for ln in every if "LEVELLED" in ln["message"]}
    assert logged == {name: f"LOG_LEVEL_{name}" for name in ("DEBUG", "INFO", "WARNING", "ERROR")}, logged

    def det(*argv: str) -> str:
        res = det_env.det(list(argv), master.url, user="admin", password=ADMIN_PASSWORD)
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout

    warnings = det("trial", "logs", str(tid), "--level", "WARNING")
    assert "LEVELLED WARNING" in warnings and "LEVELLED ERROR" in warnings
    assert "TRIAL-START" not in warnings and "LEVELLED INFO" not in warnings
    stdout_only = det("trial", "logs", str(tid), "--stdtype", "stdout")
    assert "TRIAL-START" in stdout_only and "LEVELLED" not in stdout_only
    assert "TRIAL-START" not in det("trial", "logs", str(tid), "--timestamp-after", "2999-01-01T00:00:00Z")
    found = _lines(client, tid, searchText="RESUMED-FROM")
    assert found and all("RESUMED-FROM" in ln["message"] for ln in found)

    # Ranks: lines shipped for the task with a rank each, read back by rank with the stock CLI.
    client.post("/api/v1/task/logs", {"logs": [
        {"taskId": task_id, "log": f"from rank {r}\n", "rankId": r, "level": "LOG_LEVEL_INFO"} for r in (0, 1)]})
    ranked = det("task", "logs", task_id, "--rank-id", "1")
    assert "from rank 1" in ranked and "from rank 0" not in ranked

    for bad, words in (({"levels": "LOG_LEVEL_LOUD"}, "levels"), ({"timestampAfter": "yesterday"}, "timestampAfter"),
                       ({"enableRegex": "true", "searchText": "(a+)+$"}, "enableRegex")):
        with pytest.raises(ApiError) as err:
            _lines(client, tid, **bad)
        assert err.value.status == 400 and words in err.value.body["message"], err.value.body
