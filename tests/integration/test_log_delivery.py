"""Task log lines survive master SIGKILLs mid-stream: none lost, none stored twice.

A trial prints 10,000 numbered lines (``line 0`` … ``line 9999``) on a separate det-agent while
the master is SIGKILLed N times, each time at a random point of the stream, and restarted on
the same data dir and port. A master restart ends the run it finds (the agent's hello lists it,
the new master kills it; the trial runs again without using a restart), so each kill cuts one
run short and the run after the last kill prints all 10,000 lines. For every run, the lines
stored must be exactly what it printed: ``seq`` 0, 1, 2 … without a gap or a repeat, numbers
0 … m-1 in order, and m the count the task itself recorded (in a progress file, written after
each print; a kill between the two leaves m one above it).

The agent keeps every log batch until the master acknowledges it (after storing it) and sends
it again after a reconnect; the master drops lines it already stored, by ``seq``. Without the
first, a batch written into the socket of the master being killed is lost (in about 3 of 4
kills); without the second, a re-sent batch would be stored twice.

N is DET_SOAK_MASTER_KILLS (2 by default); the full count is 10:

    DET_SOAK_MASTER_KILLS=10 .venv/bin/python -m pytest -q -s tests/integration/test_log_delivery.py
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._master import MasterProcess, create_experiment, wait_experiment, wait_for

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("DET_SOAK_MASTER_KILLS", "2"))
LINES = 10_000
PAUSE_S = 0.002  # between lines: a full run takes about 25 s, a cut one a few

SCRIPT = '''\
import os, sys, time

count, pause, progress_dir = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
path = os.path.join(progress_dir, os.environ["DET_ALLOCATION_ID"])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
for i in range(count):
    print(f"line {i}", flush=True)
    os.write(fd, b"%d\\n" % i)
    time.sleep(pause)
'''


def _agent(master: MasterProcess, work: Path) -> subprocess.Popen:
    token = work / "agent_token"
    token.write_text((master.data_dir / "agent_token").read_text())
    token.chmod(0o600)
    log = open(work / "agent.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "det_agent", "--master", master.url, "--token-file", str(token),
         "--id", "streamer", "--slots", "1", "--work-dir", str(work / "agent")],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )


def _progress(shared: Path, allocation_id: str) -> int:
    """How many lines the run recorded it printed."""
    try:
        return len((shared / allocation_id).read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def _runs(shared: Path) -> list[str]:
    return sorted((p.name for p in shared.iterdir()), key=lambda a: int(a.rsplit(".", 1)[1]))


def _stored(master: MasterProcess, trial_id: int) -> dict[str, list[tuple[int, str]]]:
    """The trial's task lines as stored, (seq, text) per allocation, in storage order."""
    db = sqlite3.connect(f"file:{master.data_dir / 'det.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT allocation_id, seq, log FROM task_logs WHERE trial_id = ? AND source = 'task' "
            "ORDER BY id", (trial_id,)).fetchall()
    finally:
        db.close()
    out: dict[str, list[tuple[int, str]]] = {}
    for allocation_id, seq, text in rows:
        out.setdefault(allocation_id, []).append((seq, text))
    return out


def test_master_sigkills_mid_stream_lose_and_repeat_no_log_line(
    bare_master: MasterProcess, tmp_path: Path, task_shared_dir: Path
) -> None:
    master = bare_master
    context = tmp_path / "context"
    context.mkdir()
    (context / "lines.py").write_text(SCRIPT)
    config = yaml.safe_dump({
        "name": "lines", "entrypoint": f"python3 lines.py {LINES} {PAUSE_S} {task_shared_dir}",
        "hyperparameters": {}, "max_restarts": 0,
        "searcher": {"name": "single", "metric": "x", "max_length": {"batches": 1}},
    })
    agent = _agent(master, tmp_path)
    rng = random.Random(os.environ.get("DET_SOAK_SEED"))
    try:
        client = master.admin()
        wait_for(lambda: client.get("/api/v1/agents")["agents"], what="the agent connected")
        exp_id = create_experiment(client, config, context)["experiment"]["id"]
        for kill in range(KILLS):
            run = wait_for(lambda k=kill: len(_runs(task_shared_dir)) == k + 1 and _runs(task_shared_dir)[-1],
                           timeout=90, what=f"run {kill + 1}")
            cut_at = rng.randrange(300, 3000)
            wait_for(lambda r=run, c=cut_at: _progress(task_shared_dir, r) >= c, timeout=60,
                     interval=0.01, what=f"{cut_at} lines of run {kill + 1}")
            master.kill9()
            master.start()
            client = master.admin()
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
        trial = client.get(f"/api/v1/experiments/{exp_id}/trials")["trials"][0]
        assert trial["restarts"] == 0
    finally:
        agent.send_signal(signal.SIGINT)
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=30)
    master.stop()
    assert "did not acknowledge" not in (tmp_path / "agent.log").read_text(), "the master acks"

    stored = _stored(master, trial["id"])
    runs = _runs(task_shared_dir)
    assert len(runs) == KILLS + 1 and sorted(stored) == sorted(runs)
    report, problems = [], []
    for allocation_id in runs:
        lines = stored[allocation_id]
        seqs = [seq for seq, _ in lines]
        numbers = [int(text.split()[1]) for _, text in lines if text.startswith("line ")]
        printed = _progress(task_shared_dir, allocation_id)
        lost = len(set(range(printed)) - set(numbers))
        repeated = len(numbers) - len(set(numbers))
        report.append(f"{allocation_id}: printed {printed}, stored {len(numbers)}, lost {lost}, "
                      f"repeated {repeated}")
        if seqs != list(range(len(seqs))):
            problems.append(f"{allocation_id}: seq has a gap or a repeat")
        if numbers != list(range(len(numbers))):
            problems.append(f"{allocation_id}: lines lost, repeated or out of order")
        if not printed <= len(numbers) <= printed + 1:
            problems.append(f"{allocation_id}: {printed} lines printed, {len(numbers)} stored")
    summary = f"{KILLS} master SIGKILLs mid-stream:\n  " + "\n  ".join(report)
    print("\n" + summary)
    assert not problems, "\n".join([*problems, summary])
    assert len(stored[runs[-1]]) == LINES, summary
