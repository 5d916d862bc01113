"""The stock ``det`` CLI (determined==0.38.1) against a real det-jupyter master, end to end.

Each test starts its own master (``master`` fixture: SQLite + an embedded agent with 2 slots) and
runs ``fixtures/steps/train.py`` — an unchanged stock Core API script — through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


def test_login_whoami_master_info_and_wrong_password(
    det_env, master: MasterProcess, tmp_path: Path
) -> None:
    url = master.url
    res = det_env.det(["user", "login", "admin"], url, input=ADMIN_PASSWORD + "\n")
    assert res.returncode == 0, res.stderr
    # The token cached by `login` is used without DET_USER/DET_PASS.
    res = det_env.det(["user", "whoami"], url)
    assert res.returncode == 0, res.stderr
    assert "You are logged in as user 'admin'" in res.stdout

    res = det_env.det(["user", "whoami"], url, **ADMIN)
    assert res.returncode == 0 and "'admin'" in res.stdout, res.stderr

    res = det_env.det(["master", "info", "--json"], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["version"] == "0.38.1"
    res = det_env.det(["master", "info"], url, **ADMIN)
    assert res.returncode == 0 and "0.38.1" in res.stdout, res.stderr

    res = det_env.det(["user", "login", "admin"], url, input="not-the-password\n")
    assert res.returncode != 0
    assert "Failed to log in user" in res.stderr and "invalid credentials" in res.stderr, res.stderr
    # An empty token cache, so DET_USER/DET_PASS are what the client logs in with.
    fresh = {"XDG_CONFIG_HOME": str(tmp_path / "no-cache")}
    res = det_env.det(["e", "list"], url, user="admin", password="not-the-password", env_extra=fresh)
    assert res.returncode != 0
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    assert "invalid credentials" in res.stderr, res.stderr


def test_create_follow_list_describe_logs_wait(det_env, master: MasterProcess, tmp_path: Path) -> None:
    url = master.url
    cfg = f.write_config(tmp_path, f.steps_config(det_env.python, name="cli-follow", length=10))
    res = det_env.det(["e", "create", str(cfg), str(f.STEPS_DIR), "-f"], url, timeout=120, **ADMIN)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    exp_id = f.created_id(res.stdout)
    # -f streams the trial's own output until the master closes the stream.
    assert "TRIAL-START" in res.stdout and "TRIAL-DONE" in res.stdout, res.stdout[-3000:]

    client = master.admin()
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                        timeout=30) == "STATE_COMPLETED"
    [t] = f.trials(client, exp_id)

    res = det_env.det(["e", "list"], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    row = next((line for line in res.stdout.splitlines() if line.strip().startswith(str(exp_id))), "")
    assert "cli-follow" in row and "COMPLETED" in row, res.stdout

    res = det_env.det(["e", "describe", "--json", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    [described] = json.loads(res.stdout)
    assert described["experiment"]["id"] == exp_id
    assert described["experiment"]["state"] == "STATE_COMPLETED"

    res = det_env.det(["t", "logs", str(t["id"])], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    # Messages keep their newline, so each printed line stays a line of its own.
    assert any(line.startswith("TRIAL-START") for line in lines), res.stdout[-2000:]
    assert any(line.startswith("TRIAL-DONE") for line in lines), res.stdout[-2000:]

    res = det_env.det(["e", "wait", str(exp_id), "--polling-interval", "1"], url, timeout=30, **ADMIN)
    assert res.returncode == 0, res.stdout + res.stderr


def test_describe_lists_trial_and_workloads(det_env, master: MasterProcess, tmp_path: Path) -> None:
    url, client = master.url, master.admin()
    cfg = f.write_config(tmp_path, f.steps_config(det_env.python, name="cli-describe", length=10,
                                                  checkpoint_storage={"save_trial_latest": 2}))
    res = det_env.det(["e", "create", str(cfg), str(f.STEPS_DIR)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    exp_id = f.created_id(res.stdout)
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                        timeout=60) == "STATE_COMPLETED"
    [t] = f.trials(client, exp_id)

    res = det_env.det(["e", "describe", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr[-3000:]
    head, _, tail = res.stdout.partition("Workloads:")
    rows = [[c.strip() for c in line.split("|")] for line in head.splitlines() if "|" in line]
    assert any(r[:3] == [str(t["id"]), str(exp_id), "COMPLETED"] for r in rows), res.stdout
    # Workloads: one row per step of the trial; steps 5 and 10 checkpointed and validated.
    rows = [[c.strip() for c in line.split("|")] for line in tail.splitlines() if "|" in line]
    steps = {r[1]: r for r in rows if r[0] == str(t["id"])}
    assert sorted(map(int, steps)) == list(range(1, 11)), res.stdout
    assert steps["5"].count("COMPLETED") == 2 and steps["10"].count("COMPLETED") == 2, res.stdout

    res = det_env.det(["e", "describe", "--metrics", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Validation Metric: vloss" in res.stdout and "Training Metric: loss" in res.stdout


def test_pause_preempts_then_activate_resumes_from_checkpoint(
    det_env, master: MasterProcess, tmp_path: Path
) -> None:
    url, client = master.url, master.admin()
    length = 60
    cfg = f.write_config(tmp_path, f.steps_config(
        det_env.python, name="cli-pause", length=length, hparams={"sleep": 0.08}))
    res = det_env.det(["e", "create", str(cfg), str(f.STEPS_DIR)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    exp_id = f.created_id(res.stdout)
    tid = f.only_trial(client, exp_id)["id"]
    f.wait_log(client, tid, "CHECKPOINT step=5")

    res = det_env.det(["e", "pause", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert f.wait_state(client, exp_id, {"STATE_PAUSED"}, timeout=60) == "STATE_PAUSED"
    assert f.wait_trial_state(client, tid, {"STATE_PAUSED"}, timeout=30) == "STATE_PAUSED"
    text = f.wait_log(client, tid, "PREEMPTED-AT")
    # should_preempt() turned true, the stock client acked and the script returned (exit 0).
    paused_at = int(text.split("PREEMPTED-AT ")[1].split()[0])
    assert 5 <= paused_at < length
    assert f.steps_of(client, tid, "checkpoint")[-1] == paused_at

    res = det_env.det(["e", "wait", str(exp_id), "--polling-interval", "1"], url, timeout=30, **ADMIN)
    assert res.returncode != 0 and "paused" in (res.stdout + res.stderr).lower()
    # A paused trial that acked is not queued again behind the user's back.
    assert f.log_text(client, tid).count("TRIAL-START") == 1
    assert f.trial(client, tid)["state"] == "STATE_PAUSED"

    res = det_env.det(["e", "activate", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                        timeout=90) == "STATE_COMPLETED"
    text = f.log_text(client, tid)
    assert text.count("TRIAL-START") == 2, text[-3000:]
    assert f"RESUMED-FROM {paused_at}" in text, text[-3000:]
    train_steps = f.steps_of(client, tid, "training")
    assert len(train_steps) == len(set(train_steps)), f"a step was reported twice: {train_steps}"
    assert train_steps == list(range(1, length + 1))
    t = f.trial(client, tid)
    assert t["restarts"] == 0, "a preemption is not a failure"
    assert t["totalBatchesProcessed"] == length


def test_kill_cancels_and_wait_fails(det_env, master: MasterProcess, tmp_path: Path) -> None:
    url, client = master.url, master.admin()
    cfg = f.write_config(tmp_path, f.steps_config(
        det_env.python, name="cli-kill", length=1000, hparams={"sleep": 0.1}))
    res = det_env.det(["e", "create", str(cfg), str(f.STEPS_DIR)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    exp_id = f.created_id(res.stdout)
    tid = f.only_trial(client, exp_id)["id"]
    f.wait_log(client, tid, "RESUMED-FROM 0")

    res = det_env.det(["e", "kill", str(exp_id)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert f.wait_state(client, exp_id, {"STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"},
                        timeout=30) == "STATE_CANCELED"
    assert f.trial(client, tid)["state"] == "STATE_CANCELED"
    res = det_env.det(["e", "wait", str(exp_id), "--polling-interval", "1"], url, timeout=30, **ADMIN)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "TRIAL-DONE" not in f.log_text(client, tid)


def test_an_id_is_never_reused_after_delete(det_env, any_master: MasterProcess, tmp_path: Path) -> None:
    """Issue 27: after the stock ``det e delete`` of the newest experiment, the next one gets a
    new id (0.38.1's sequences; SQLite tables keep AUTOINCREMENT), on both backends."""
    url = any_master.url
    cfg = f.write_config(tmp_path, f.steps_config(det_env.python, name="cli-ids", length=1))
    made = []
    for _ in range(2):
        res = det_env.det(["e", "create", "--paused", str(cfg), str(f.STEPS_DIR)], url, **ADMIN)
        assert res.returncode == 0, res.stderr
        made.append(f.created_id(res.stdout))
    res = det_env.det(["e", "kill", str(made[1])], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    f.wait_state(any_master.admin(), made[1], {"STATE_CANCELED"}, timeout=30)
    res = det_env.det(["e", "delete", str(made[1]), "--yes"], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    client = any_master.admin()
    wait_for(lambda: made[1] not in [e["id"] for e in client.get("/api/v1/experiments")["experiments"]],
             timeout=30, what=f"experiment {made[1]} to be deleted")
    res = det_env.det(["e", "create", "--paused", str(cfg), str(f.STEPS_DIR)], url, **ADMIN)
    assert res.returncode == 0, res.stderr
    assert f.created_id(res.stdout) == made[1] + 1
