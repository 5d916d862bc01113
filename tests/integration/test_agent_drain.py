"""A det-agent's own stop: its token from a file (never argv), and a planned stop (SIGTERM) that
preempts its trials so they resume elsewhere without using a restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests._master import Client, MasterProcess, create_experiment, wait_experiment, wait_for
from tests.integration._exp import submit_counter, trials

pytestmark = pytest.mark.slow


def token_file(master: MasterProcess, work: Path) -> Path:
    """A private copy of the master's agent token, as an admin would install it."""
    path = work / "agent_token" if work.is_dir() else work
    work = path.parent
    path.write_text((master.data_dir / "agent_token").read_text())
    path.chmod(0o600)
    return path


def start_file_agent(master: MasterProcess, work: Path, agent_id: str, *, slots: int = 1,
                     drain_timeout: float = 30.0, token_at: Path | None = None) -> subprocess.Popen:
    """``det-agent --token-file`` as its own process, logging to ``work/<agent_id>.log``
    (``token_at``: where the token file goes; default ``work/agent_token``)."""
    log = open(work / f"{agent_id}.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "det_agent", "--master", master.url,
         "--token-file", str(token_file(master, token_at or work)), "--id", agent_id, "--slots", str(slots),
         "--work-dir", str(work / agent_id), "--drain-timeout", str(drain_timeout)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )


def trial_log_text(client: Client, trial_id: int) -> str:
    """The trial's log so far ("" before its first line)."""
    lines = client.get(f"/api/v1/trials/{trial_id}/logs")
    if isinstance(lines, dict):
        lines = [lines] if lines else []
    return "".join(entry["result"]["message"] for entry in lines)


def agent_ids(client: Client) -> set[str]:
    return {a["id"] for a in client.get("/api/v1/agents")["agents"]}


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)  # the second one kills at once
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_agent_with_a_token_file_keeps_the_token_out_of_its_command_line(
    bare_master: MasterProcess, tmp_path: Path
) -> None:
    token = (bare_master.data_dir / "agent_token").read_text().strip()
    agent = start_file_agent(bare_master, tmp_path, "filed")
    try:
        client = bare_master.admin()
        wait_for(lambda: "filed" in agent_ids(client), what="the agent connected with its token file")
        cmdline = Path(f"/proc/{agent.pid}/cmdline").read_bytes()
        assert b"--token-file" in cmdline  # the right process
        assert token.encode() not in cmdline
    finally:
        stop_all([agent])
    log = (tmp_path / "filed.log").read_text()
    assert "visible" not in log and "process's command line" not in log  # no --token warning


PEEK = """\
import sys
try:
    print("the token file reads as", repr(open(sys.argv[1]).read()))
except OSError as e:
    print(f"the token file is hidden: {e}")
"""


def test_tasks_run_and_cannot_read_the_agents_token_file(
    bare_master: MasterProcess, tmp_path: Path, task_shared_dir: Path
) -> None:
    """The token file in a directory every task could reach: it is hidden, the task runs."""
    context = tmp_path / "peek"
    context.mkdir()
    (context / "peek.py").write_text(PEEK)
    token = task_shared_dir / "agent_token"
    agent = start_file_agent(bare_master, tmp_path, "peeked", token_at=token)
    try:
        client = bare_master.admin()
        wait_for(lambda: "peeked" in agent_ids(client), what="the agent connected")
        config = yaml.safe_dump({
            "name": "peek", "entrypoint": f"python3 peek.py {token}", "hyperparameters": {},
            "max_restarts": 0, "searcher": {"name": "single", "metric": "x", "max_length": {"batches": 1}},
        })
        exp_id = create_experiment(client, config, context)["experiment"]["id"]
        state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=60)
        log = trial_log_text(client, trials(client, exp_id)[0]["id"])
        assert state == "STATE_COMPLETED", log
        secret = token.read_text().strip()
        assert "the token file reads as ''" in log or "the token file is hidden" in log, log
        assert secret not in log
    finally:
        stop_all([agent])


def test_token_flag_still_works_but_warns(bare_master: MasterProcess, tmp_path: Path) -> None:
    token = (bare_master.data_dir / "agent_token").read_text().strip()
    log = open(tmp_path / "flagged.log", "ab")
    agent = subprocess.Popen(
        [sys.executable, "-m", "det_agent", "--master", bare_master.url, "--token", token,
         "--id", "flagged", "--slots", "1", "--work-dir", str(tmp_path / "flagged")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    try:
        client = bare_master.admin()
        wait_for(lambda: "flagged" in agent_ids(client), what="the agent connected with --token")
    finally:
        stop_all([agent])
    assert "use --token-file PATH instead" in (tmp_path / "flagged.log").read_text()


def test_sigterm_preempts_the_trial_which_resumes_on_the_other_agent_without_a_restart(
    bare_master: MasterProcess, tmp_path: Path
) -> None:
    client = bare_master.admin()
    # The trial runs ~20 s; the drain waits up to 10 s: a task the master did not preempt is
    # killed (and restarted), one that was checkpoints within 0.5 s and leaves.
    agents = {name: start_file_agent(bare_master, tmp_path, name, drain_timeout=10)
              for name in ("left", "right")}
    try:
        wait_for(lambda: agent_ids(client) == set(agents), what="two agents")
        exp_id = submit_counter(client, length=200, sleep=0.1, ckpt_every=5)
        wait_for(lambda: (ts := trials(client, exp_id)) and "run 1 starting" in trial_log_text(client, ts[0]["id"]),
                 what="the trial running")
        trial_id = trials(client, exp_id)[0]["id"]
        live = client.get("/api/v1/tasks")["allocationIdToSummary"]
        assert len(live) == 1
        first = next(iter(next(iter(live.values()))["resources"][0]["agentDevices"]))
        wait_for(lambda: "preempted" not in trial_log_text(client, trial_id)
                 and len(client.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]) >= 1,
                 what="a first checkpoint")
        leaving = agents[first]
        stopped_at = time.time()
        leaving.send_signal(signal.SIGTERM)
        assert leaving.wait(timeout=40) == 0, "the agent exits on its own once its task left"
        assert time.time() - stopped_at < 8, "the trial checkpoints at its next step; no drain timeout"
        wait_for(lambda: "run 2 starting" in trial_log_text(client, trial_id), timeout=30,
                 what="the trial's second run")
        resumed_after = time.time() - stopped_at
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
        trial = client.get(f"/api/v1/trials/{trial_id}")["trial"]
        assert trial["restarts"] == 0, "a planned agent stop is not the trial's fault"
        log = trial_log_text(client, trial_id)
        assert f"agent {first} is stopping" in log
        preempted_at = int(log.split("preempted at step ")[1].split()[0])
        resumed_at = int(log.split("run 2 starting at step ")[1].split()[0])
        assert resumed_at == preempted_at > 0, "run 2 resumes from the checkpoint run 1 left"
        assert "crash" not in log and "was lost" not in log
        assert resumed_after < 25, f"run 2 started {resumed_after:.1f} s after the SIGTERM"
        other = "right" if first == "left" else "left"
        assert agent_ids(client) == {other}, "the stopped agent is gone at once, not after a wait"
        agent_log = (tmp_path / f"{first}.log").read_text()
        assert "killing them" not in agent_log  # nothing was left to kill
    finally:
        stop_all(list(agents.values()))
    assert "Traceback" not in bare_master.log()


def test_a_task_that_does_not_stop_in_time_is_killed_and_still_not_blamed(
    bare_master: MasterProcess, tmp_path: Path
) -> None:
    """A trial that never checks for preemption within the drain bound (it checkpoints only at
    its end) is killed when the bound is over; that exit is a preemption too: the trial runs
    again on the other agent, from the start, its restart count unchanged."""
    client = bare_master.admin()
    agents = {name: start_file_agent(bare_master, tmp_path, name, drain_timeout=2)
              for name in ("left", "right")}
    try:
        wait_for(lambda: agent_ids(client) == set(agents), what="two agents")
        exp_id = submit_counter(client, length=80, sleep=0.05, ckpt_every=1000, max_restarts=0)
        wait_for(lambda: (ts := trials(client, exp_id)) and "run 1 starting" in trial_log_text(client, ts[0]["id"]),
                 what="the trial running")
        trial_id = trials(client, exp_id)[0]["id"]
        live = client.get("/api/v1/tasks")["allocationIdToSummary"]
        first = next(iter(next(iter(live.values()))["resources"][0]["agentDevices"]))
        agents[first].send_signal(signal.SIGTERM)
        assert agents[first].wait(timeout=30) == 0
        assert "did not exit within 2 s; killing them" in (tmp_path / f"{first}.log").read_text()
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
        trial = client.get(f"/api/v1/trials/{trial_id}")["trial"]
        assert trial["restarts"] == 0, "killed by a planned stop: not the trial's fault (max_restarts 0)"
        assert "run 2 starting at step 0" in trial_log_text(client, trial_id)
    finally:
        stop_all(list(agents.values()))
