"""The ``det`` console script (.venv/bin/det) as a user runs it, against a real master."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for
from tests.integration._exp import COUNTER, counter_config

DET = Path(sys.executable).parent / "det"


@pytest.fixture(scope="module")
def shared_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("cli") / "master").start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def env(shared_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """DET_MASTER set, a private token cache, and admin logged in through ``det user login``."""
    if not DET.exists():
        pytest.skip(f"{DET} is missing: run pip install -e . to install the det console script")
    out = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    out["DET_MASTER"] = shared_master.url
    out["DET_JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("cli-cfg"))
    done = subprocess.run([str(DET), "user", "login", "admin"], input=ADMIN_PASSWORD + "\n",
                          env=out, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "as 'admin'" in done.stdout
    return out


def det(env: dict[str, str], *argv: str, timeout: float = 120, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(DET), *argv], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if ok:
        assert done.returncode == 0, f"det {' '.join(argv)} exited {done.returncode}:\n{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


@pytest.fixture(scope="module")
def finished_exp(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """``det e create CONFIG CONTEXT -f``: its id and everything it printed."""
    config = tmp_path_factory.mktemp("cfg") / "counter.yaml"
    config.write_text(counter_config(length=10, sleep=0.01))
    done = det(env, "e", "create", str(config), str(COUNTER), "-f")
    match = re.search(r"Created experiment (\d+)", done.stdout)
    assert match, done.stdout
    return int(match.group(1)), done.stdout


def test_create_follow_prints_the_trials_logs(finished_exp: tuple[int, str]) -> None:
    exp_id, out = finished_exp
    assert "run 1 starting at step 0" in out
    assert "done" in out.splitlines()
    assert f"Experiment {exp_id} ended COMPLETED" in out


def test_list_describe_logs_and_wait(env: dict[str, str], finished_exp: tuple[int, str],
                                     tmp_path: Path) -> None:
    exp_id, _ = finished_exp
    listed = det(env, "experiment", "list").stdout.splitlines()
    assert [h.strip() for h in listed[0].split("|")][:4] == ["ID", "Owner", "Name", "State"]
    assert set(listed[1]) <= {"-", "+"}
    row = next(line for line in listed[2:] if line.split("|")[0].strip() == str(exp_id))
    assert "admin" in row and "counter" in row and "COMPLETED" in row and "100.0%" in row
    assert exp_id in [e["id"] for e in json.loads(det(env, "e", "ls", "--all", "--json").stdout)]

    described = det(env, "e", "describe", str(exp_id)).stdout
    assert re.search(r"^State:\s+COMPLETED$", described, re.M)
    assert "Trial ID" in described
    full = json.loads(det(env, "e", "describe", str(exp_id), "--json").stdout)
    assert full["experiment"]["id"] == exp_id and len(full["trials"]) == 1
    trial_id = full["trials"][0]["id"]

    assert "done" in det(env, "e", "logs", str(exp_id)).stdout.splitlines()
    assert "done" in det(env, "t", "logs", str(trial_id), "-f").stdout.splitlines()
    trial = det(env, "trial", "describe", str(trial_id), "--metrics").stdout
    assert "Validation metrics:" in trial and "validation_loss" in trial
    data = json.loads(det(env, "t", "describe", str(trial_id), "--json", "--metrics").stdout)
    assert [r["steps_completed"] for r in data["validation_metrics"]] == [5, 10]
    assert len(data["checkpoints"]) == 2
    uuid = data["checkpoints"][-1]["uuid"]
    assert re.search(r"^Steps Completed:\s+10$", det(env, "checkpoint", "describe", uuid).stdout, re.M)
    dest = tmp_path / "ckpt"
    assert str(dest) in det(env, "c", "download", uuid, "-o", str(dest)).stdout
    assert json.loads((dest / "state.json").read_text()) == {"step": 10}

    waited = det(env, "e", "wait", str(exp_id))
    assert f"Experiment {exp_id} ended COMPLETED" in waited.stdout


def test_pause_activate_kill(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "long.yaml"
    config.write_text(counter_config(length=2000, sleep=0.05))
    created = re.search(r"Created experiment (\d+)", det(env, "e", "create", str(config), str(COUNTER)).stdout)
    assert created
    exp_id = int(created.group(1))
    assert "pause requested" in det(env, "e", "pause", str(exp_id)).stdout
    assert "activate requested" in det(env, "e", "activate", str(exp_id)).stdout
    det(env, "e", "kill", str(exp_id))
    big = tmp_path / "big.yaml"
    big.write_text(counter_config(length=2) + "resources: {slots_per_trial: 64}\n")
    warned = det(env, "e", "create", "--paused", str(big), str(COUNTER))
    assert "Warning: LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED" in warned.stderr
    det(env, "e", "kill", re.findall(r"\d+", warned.stdout)[0])
    waited = det(env, "e", "wait", str(exp_id), "--interval", "0.3", ok=False)
    assert waited.returncode == 1 and f"Experiment {exp_id} ended CANCELED" in waited.stdout


def test_cluster_commands(env: dict[str, str]) -> None:
    info = det(env, "master", "info").stdout
    assert re.search(r"^version:\s+0\.38\.1$", info, re.M)
    assert json.loads(det(env, "master", "info", "--json").stdout)["version"] == "0.38.1"
    assert det(env, "job", "list").stdout.startswith("#")
    assert isinstance(json.loads(det(env, "j", "ls", "--json").stdout), list)
    agents = det(env, "agent", "list").stdout.splitlines()
    assert agents[0].startswith("Agent ID") and len(agents) == 3
    slots = det(env, "slot", "list").stdout.splitlines()
    assert len(slots) == 2 + 2  # header, rule, two CPU slots
    assert det(env, "user", "whoami").stdout.strip() == "You are logged in as user 'admin'"


def test_job_agent_and_slot_control(env: dict[str, str], tmp_path: Path) -> None:
    agent = json.loads(det(env, "agent", "list", "--json").stdout)[0]["id"]
    # A disabled agent's slots take nothing: an experiment stays queued with a reason.
    assert f"Agent {agent} draining" in det(env, "agent", "disable", "--drain", agent).stdout
    assert json.loads(det(env, "agent", "list", "--json").stdout)[0]["enabled"] is False
    config = tmp_path / "queued.yaml"
    config.write_text(counter_config(length=3))
    exp_id = re.findall(r"\d+", det(env, "e", "create", str(config), str(COUNTER)).stdout)[0]
    jobs = json.loads(det(env, "job", "list", "--json").stdout)
    job = next(j for j in jobs if j.get("entityId") == exp_id)
    assert det(env, "job", "update", job["jobId"], "--priority", "7").stdout.startswith("Updated job")
    jobs = json.loads(det(env, "job", "list", "--json").stdout)
    assert next(j for j in jobs if j["jobId"] == job["jobId"])["priority"] == 7
    nothing = det(env, "job", "update", job["jobId"], ok=False)
    assert nothing.returncode == 1 and "say what to change" in nothing.stderr
    assert f"Agent {agent} enabled" in det(env, "agent", "enable", agent).stdout
    assert "disabled" in det(env, "slot", "disable", agent, "0").stdout
    slots = json.loads(det(env, "slot", "list", "--json").stdout)
    assert [s["enabled"] for s in slots if s["agentId"] == agent][:1] == [False]
    det(env, "slot", "enable", agent, "0")
    det(env, "e", "wait", exp_id, "--interval", "0.3")


def test_errors_are_one_line_without_a_traceback(env: dict[str, str], tmp_path: Path) -> None:
    for argv in (["e", "describe", "987654"], ["t", "logs", "987654"], ["e", "kill", "987654"]):
        done = det(env, *argv, ok=False)
        assert done.returncode == 1
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "987654 not found (HTTP 404)" in done.stderr
    done = det(env, "e", "create", str(tmp_path / "missing.yaml"), str(COUNTER), ok=False)
    assert done.returncode == 1 and "cannot read the config file" in done.stderr
    unreachable = det({**env, "DET_MASTER": "http://127.0.0.1:9"}, "user", "login", "--password",
                      "x", "admin", ok=False)
    assert unreachable.returncode == 1 and "cannot reach the master" in unreachable.stderr
    no_login = det({**env, "DET_JUPYTER_CONFIG_DIR": str(tmp_path)}, "e", "list", ok=False)
    assert no_login.returncode == 1 and "det user login" in no_login.stderr
    # not logged in to a master that does not answer: the master is the problem, not the login
    nowhere = det({**env, "DET_JUPYTER_CONFIG_DIR": str(tmp_path), "DET_MASTER": "http://127.0.0.1:9"},
                  "e", "list", ok=False)
    assert nowhere.returncode == 1 and "cannot reach the master" in nowhere.stderr, nowhere.stderr


def test_help_for_every_command(env: dict[str, str]) -> None:
    top = det(env, "--help").stdout
    for word in ("experiment (e)", "trial (t)", "job (j)", "agent (a)", "user", "master", "slot"):
        assert word in top
    for argv in (["e"], ["e", "create"], ["e", "list"], ["e", "describe"], ["e", "pause"],
                 ["e", "activate"], ["e", "cancel"], ["e", "kill"], ["e", "wait"], ["e", "logs"],
                 ["t", "describe"], ["t", "logs"], ["user", "login"], ["user", "logout"],
                 ["user", "whoami"], ["master", "info"], ["job", "list"], ["agent", "list"],
                 ["slot", "list"], ["checkpoint", "describe"], ["checkpoint", "download"],
                 ["job", "update"], ["agent", "enable"], ["agent", "disable"], ["slot", "enable"],
                 ["slot", "disable"]):
        assert det(env, *argv, "--help").stdout.startswith("usage: det")
    bad = det(env, "e", "frobnicate", ok=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_det_user_rename_renames(env: dict[str, str]) -> None:
    """``det user rename OLD NEW`` (it failed with a TypeError before)."""
    det(env, "user", "create", "renamee", "--password", "Renamee-Passw0rd")
    assert det(env, "user", "rename", "renamee", "renamed").stdout.strip() == "User 'renamee' renamed to 'renamed'"
    names = [u["username"] for u in json.loads(det(env, "user", "list", "--json").stdout)]
    assert "renamed" in names and "renamee" not in names
    missing = det(env, "user", "rename", "nobody-here", "x", ok=False)
    assert missing.returncode != 0 and "nobody-here" in missing.stderr


def _csv(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def test_experiment_and_trial_checkpoint_commands(env: dict[str, str], finished_exp: tuple[int, str],
                                                  tmp_path: Path) -> None:
    """``det e list-checkpoints|download`` and ``det t list-checkpoints|download|metrics`` over
    the counter run (validation_loss = 1/step at steps 5 and 10; ``batches`` = step). The
    default checkpoint policy keeps the trial's best and latest: step 10's; step 5's is
    DELETED, listed, and never downloaded."""
    exp_id, _ = finished_exp
    trial_id = json.loads(det(env, "e", "describe", str(exp_id), "--json").stdout)["trials"][0]["id"]

    def listed() -> list[dict[str, str]] | None:  # once the end's checkpoint GC has run
        rows = _csv(det(env, "e", "list-checkpoints", str(exp_id), "--csv").stdout)
        return rows if any(r["State"] == "DELETED" for r in rows) else None

    rows = wait_for(listed, timeout=60, what="step 5's checkpoint collected")
    assert [(r["Trial ID"], r["# of Batches"], r["State"]) for r in rows] == [
        (str(trial_id), "5", "DELETED"), (str(trial_id), "10", "COMPLETED")]
    assert float(rows[0]["Validation Metric"]) == pytest.approx(0.2)
    by_steps = {r["# of Batches"]: r["UUID"] for r in rows}
    best = _csv(det(env, "e", "lc", str(exp_id), "--best", "1", "--csv").stdout)
    assert [r["UUID"] for r in best] == [by_steps["10"]]
    assert det(env, "e", "lc", str(exp_id), "--best", "0", ok=False).returncode == 1

    # the best by the searcher metric (smaller validation_loss), then by another metric
    out = det(env, "e", "download", str(exp_id), "-o", str(tmp_path / "top"), "-q").stdout
    assert out.split() == [str(tmp_path / "top" / by_steps["10"])]
    assert json.loads((tmp_path / "top" / by_steps["10"] / "state.json").read_text()) == {"step": 10}
    out = det(env, "e", "download", str(exp_id), "-o", str(tmp_path / "two"), "--top-n", "2",
              "--sort-by", "batches", "--smaller-is-better", "true", "-q").stdout
    assert out.split() == [str(tmp_path / "two" / by_steps["10"])]  # step 5's is deleted
    lone = det(env, "e", "download", str(exp_id), "--sort-by", "batches", ok=False)
    assert lone.returncode == 1 and "--smaller-is-better" in lone.stderr

    trial_rows = _csv(det(env, "t", "list-checkpoints", str(trial_id), "--csv").stdout)
    assert [r["UUID"] for r in trial_rows] == [by_steps["5"], by_steps["10"]]
    latest = det(env, "t", "download", str(trial_id), "--latest", "-o", str(tmp_path / "latest"), "-q")
    assert latest.stdout.strip() == str(tmp_path / "latest")
    assert json.loads((tmp_path / "latest" / "state.json").read_text()) == {"step": 10}
    worst = det(env, "t", "download", str(trial_id), "--best", "--sort-by", "validation_loss",
                "--smaller-is-better", "false", "-o", str(tmp_path / "worst"))
    assert "Local checkpoint path:" in worst.stdout and by_steps["10"] in worst.stdout  # 5's is gone
    assert json.loads((tmp_path / "worst" / "state.json").read_text()) == {"step": 10}
    # through the master (GET /checkpoints/{uuid}), as where the storage is not visible
    via = det(env, "c", "download", by_steps["10"], "--mode", "master", "-o", str(tmp_path / "via"), "-q")
    assert via.stdout.strip() == str(tmp_path / "via")
    assert json.loads((tmp_path / "via" / "state.json").read_text()) == {"step": 10}
    assert sorted(p.name for p in (tmp_path / "via").iterdir()) == sorted(
        p.name for p in (tmp_path / "latest").iterdir())
    gone = det(env, "c", "download", by_steps["5"], "--mode", "master", "-o", str(tmp_path / "g"), ok=False)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr and gone.stderr.strip()
    gone = det(env, "t", "download", str(trial_id), "--uuid", by_steps["5"], ok=False)
    assert gone.returncode == 1 and "DELETED" in gone.stderr + gone.stdout
    wrong = det(env, "t", "download", str(trial_id + 1000), "--uuid", by_steps["5"], ok=False)
    assert wrong.returncode == 1 and "not trial" in wrong.stderr

    val = _csv(det(env, "t", "metrics", str(trial_id), "--group", "validation", "--csv").stdout)
    assert [(r["Group"], r["Batches"], r["batches"]) for r in val] == [("validation", "5", "5"),
                                                                       ("validation", "10", "10")]
    both = json.loads(det(env, "t", "metrics", str(trial_id), "--json").stdout)
    assert [r["steps_completed"] for r in both["training"]] == list(range(1, 11))
    table = det(env, "t", "metrics", str(trial_id)).stdout
    assert "Training metrics:" in table and "Validation metrics:" in table


def test_list_filters_test_mode_and_checkpoint_list(env: dict[str, str], finished_exp: tuple[int, str],
                                                   tmp_path: Path) -> None:
    """``det e list`` filters (user, state, name, labels, limit/offset: the master's), ``det e
    create --test`` (checked, nothing stored; a typo named) and ``det checkpoint list``."""
    exp_id, _ = finished_exp

    def ids(*argv: str) -> list[int]:
        return [e["id"] for e in json.loads(det(env, "e", "ls", *argv, "--json").stdout)]

    config = tmp_path / "c.yaml"
    config.write_text(counter_config(length=2))
    before = ids("--all")
    assert "validation succeeded" in det(env, "e", "create", "--test", str(config), str(COUNTER)).stdout
    typo = tmp_path / "typo.yaml"
    typo.write_text(counter_config(length=2).replace("max_length", "max_lenght"))
    bad = det(env, "e", "create", "--test", str(typo), str(COUNTER), ok=False)
    assert bad.returncode == 1 and "max_lenght" in bad.stderr and "max_length" in bad.stderr
    assert ids("--all") == before  # neither created anything

    made = []
    for labels in ("red, big", "red", "big, red, x"):
        out = det(env, "e", "create", "--paused", "--config", "name=filter-me", str(config), str(COUNTER)).stdout
        made.append(int(re.findall(r"Created experiment (\d+)", out)[0]))
        det(env, "e", "set", "labels", str(made[-1]), labels)
    assert ids("--name", "filter-me") == made
    assert ids("--label", "red") == made
    assert ids("--label", "big", "--label", "red") == [made[0], made[2]]
    assert ids("--label", "re") == []  # whole labels, not substrings
    assert ids("--label", "red", "--limit", "1", "--offset", "1") == [made[1]]
    assert ids("--state", "PAUSED", "--name", "filter-me") == made
    assert exp_id in ids("--state", "COMPLETED") and not set(made) & set(ids("--state", "COMPLETED"))
    assert set(made) <= set(ids("--user", "admin")) and ids("--user", "nobody-here") == []
    for e in made:
        det(env, "e", "kill", str(e))

    listed = _csv(det(env, "checkpoint", "list", str(exp_id), "--csv").stdout)
    same = _csv(det(env, "e", "list-checkpoints", str(exp_id), "--csv").stdout)
    assert listed == same and [r["# of Batches"] for r in listed] == ["5", "10"]


def test_experiment_set_label_and_fork(env: dict[str, str], finished_exp: tuple[int, str]) -> None:
    exp_id, _ = finished_exp
    det(env, "e", "set", "description", str(exp_id), "set by the CLI test")
    det(env, "e", "set", "labels", str(exp_id), "a, b")
    assert "Added label 'c'" in det(env, "e", "label", "add", str(exp_id), "c").stdout
    removed = det(env, "e", "label", "remove", str(exp_id), "a").stdout
    assert "Labels: b, c" in removed
    exp = json.loads(det(env, "e", "describe", str(exp_id), "--json").stdout)["experiment"]
    assert exp["description"] == "set by the CLI test" and sorted(exp["labels"]) == ["b", "c"]
    bad = det(env, "e", "set", "priority", str(exp_id), "high", ok=False)
    assert bad.returncode == 2 and "invalid int value" in bad.stderr

    forked = det(env, "e", "fork", str(exp_id), "--paused", "--config", "hyperparameters.length=4",
                 "--config", "name=forked").stdout
    match = re.search(r"Created experiment (\d+) \(forked from (\d+)\)", forked)
    assert match and int(match.group(2)) == exp_id
    child = int(match.group(1))
    desc = json.loads(det(env, "e", "describe", str(child), "--json").stdout)["experiment"]
    assert desc["state"] == "STATE_PAUSED" and desc["name"] == "forked"
    assert desc["config"]["hyperparameters"]["length"] == {"type": "const", "val": 4}
    det(env, "e", "set", "priority", str(child), "7")
    det(env, "e", "activate", str(child))
    waited = det(env, "e", "wait", str(child), "--interval", "0.3", timeout=180)
    assert f"Experiment {child} ended COMPLETED" in waited.stdout
    child_trial = json.loads(det(env, "e", "describe", str(child), "--json").stdout)["trials"][0]["id"]
    steps = json.loads(det(env, "t", "metrics", str(child_trial), "--json").stdout)["training"]
    assert [r["steps_completed"] for r in steps] == [1, 2, 3, 4]  # the forked config, the parent's code


def test_experiment_continue(env: dict[str, str], tmp_path: Path) -> None:
    """``det e continue ID --config searcher.max_length.batches=N -f``: the finished trial
    resumes from its checkpoint and trains on to N; what cannot change is refused."""
    import yaml

    cfg = yaml.safe_load(counter_config(length="searcher", sleep=0.01, ckpt_every=2))
    cfg["searcher"]["max_length"] = {"batches": 3}
    config = tmp_path / "continue.yaml"
    config.write_text(yaml.safe_dump(cfg))
    created = re.search(r"Created experiment (\d+)", det(env, "e", "create", str(config), str(COUNTER), "-f").stdout)
    assert created
    exp_id = created.group(1)
    desc = json.loads(det(env, "e", "describe", exp_id, "--json").stdout)
    assert desc["experiment"]["state"] == "STATE_COMPLETED"
    old_length = desc["experiment"]["config"]["searcher"]["max_length"]["batches"]
    trial_id = str(desc["trials"][0]["id"])
    ckpts = json.loads(det(env, "t", "lc", trial_id, "--json").stdout)
    resumed_at = max(int(c["metadata"]["steps_completed"]) for c in ckpts)
    new_length = old_length + 3

    out = det(env, "e", "continue", exp_id, "--config", f"searcher.max_length.batches={new_length}", "-f",
              timeout=180).stdout
    assert f"Continued experiment {exp_id}" in out
    assert f"run 2 starting at step {resumed_at}" in out
    assert f"Experiment {exp_id} ended COMPLETED" in out
    desc = json.loads(det(env, "e", "describe", exp_id, "--json").stdout)
    assert desc["experiment"]["config"]["searcher"]["max_length"] == {"batches": new_length}
    steps = json.loads(det(env, "t", "metrics", trial_id, "--json").stdout)["training"]
    assert [r["steps_completed"] for r in steps] == list(range(1, new_length + 1))

    moved = det(env, "e", "continue", exp_id, "--config", "workspace=elsewhere", ok=False)
    assert moved.returncode == 1 and "'workspace'" in moved.stderr and len(moved.stderr.strip().splitlines()) == 1


def test_trial_kill(env: dict[str, str], tmp_path: Path) -> None:
    import time

    config = tmp_path / "long.yaml"
    config.write_text(counter_config(length=2000, sleep=0.05))
    created = re.search(r"Created experiment (\d+)", det(env, "e", "create", str(config), str(COUNTER)).stdout)
    assert created
    exp_id = int(created.group(1))
    deadline = time.monotonic() + 120
    trials: list[dict] = []
    while not trials and time.monotonic() < deadline:
        trials = json.loads(det(env, "e", "describe", str(exp_id), "--json").stdout)["trials"]
        time.sleep(0.3)
    assert trials, "the experiment made no trial"
    assert f"Killed trial {trials[0]['id']}" in det(env, "t", "kill", str(trials[0]["id"])).stdout
    state = ""
    while time.monotonic() < deadline:
        state = json.loads(det(env, "t", "describe", str(trials[0]["id"]), "--json").stdout)["trial"]["state"]
        if state in ("STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"):
            break
        time.sleep(0.3)
    assert state == "STATE_CANCELED"
    missing = det(env, "t", "kill", "987654", ok=False)
    assert missing.returncode == 1 and "987654" in missing.stderr


def test_preview_search_log_retention_and_tb_files(env: dict[str, str], finished_exp: tuple[int, str],
                                                  tmp_path: Path) -> None:
    exp_id, _ = finished_exp
    asha = tmp_path / "asha.yaml"  # the plan of tests/unit/test_search_preview.py, worked by hand
    asha.write_text("hyperparameters: {lr: {type: double, minval: 0.001, maxval: 0.1}}\n"
                    "searcher: {name: adaptive_asha, metric: loss, max_trials: 16, time_metric: batches, "
                    "max_time: 1000}\n")
    out = det(env, "preview-search", str(asha)).stdout
    assert out.startswith("Using search configuration:") and "name: adaptive_asha" in out
    rows = [[c.strip() for c in line.split("|")] for line in out.splitlines() if "train for" in line]
    assert rows == [["9", "train for 62 batches"], ["5", "train for 250 batches"], ["2", "train for 1000 batches"]]
    nosearch = tmp_path / "none.yaml"
    nosearch.write_text("name: x\n")
    bad = det(env, "preview-search", str(nosearch), ok=False)
    assert bad.returncode == 1 and "no searcher section" in bad.stderr

    kept = det(env, "e", "set", "log-retention", str(exp_id), "--days", "30").stdout
    assert f"Logs of experiment {exp_id}'s trials are kept 30 day(s)" in kept
    desc = json.loads(det(env, "e", "describe", str(exp_id), "--json").stdout)
    assert desc["experiment"]["config"]["retention_policy"]["log_retention_days"] == 30
    trial_id = desc["trials"][0]["id"]
    assert "kept forever" in det(env, "t", "set", "log-retention", str(trial_id), "--forever").stdout
    big = det(env, "e", "set", "log-retention", str(exp_id), "--days", "40000", ok=False)
    assert big.returncode == 1 and "32767" in big.stderr
    assert "Deleted the TensorBoard files" in det(env, "e", "delete-tb-files", str(exp_id)).stdout
    gone = det(env, "e", "delete-tb-files", "987654", ok=False)
    assert gone.returncode == 1 and "not found" in gone.stderr
