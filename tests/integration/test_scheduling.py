"""Scheduling on a real cluster: fair-share preemption, queue edits, agent loss and draining.

Real master processes, real ``det-agent`` processes and real trials (the counter fixture, which
checkpoints every ``ckpt_every`` steps and stops there when preempted). Each test checks what
the master says (the job queue, trials, agents) and what the trials did (their logs and steps).
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._master import (
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    free_port,
    start_agent,
    wait_experiment,
    wait_for,
)
from tests.integration._exp import COUNTER, counter_config, training_steps, trials

pytestmark = pytest.mark.slow

QUEUE = "/api/v1/job-queues-v2"
DONE = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


# -- cluster pieces ------------------------------------------------------------------------


def _master_config(tmp_path: Path, scheduler: dict[str, Any]) -> Path:
    path = tmp_path / "master.yaml"
    path.write_text(yaml.safe_dump({"resource_manager": {"scheduler": scheduler}}))
    return path


def _stop_agent(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    """Agent processes a test starts; all stopped at the end."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        _stop_agent(p)


@contextmanager
def _bare_master(tmp_path: Path, *args: str) -> Iterator[MasterProcess]:
    """A master with no embedded agent (agents are det-agent processes), stopped on exit."""
    m = MasterProcess(tmp_path / "master", extra_args=["--no-agent", *args]).start()
    try:
        yield m
    finally:
        m.stop()


def _wait_agents(client: Client, n: int) -> list[dict]:
    return wait_for(lambda: len(a := client.get("/api/v1/agents")["agents"]) == n and a,
                    what=f"{n} agents registered")


# -- experiments and the queue ---------------------------------------------------------------


def _submit(client: Client, name: str, *, trials_n: int = 1, **hp: Any) -> dict:
    """A counter experiment (a grid of ``trials_n`` trials, all at once); its record."""
    searcher = None
    if trials_n > 1:
        hp["x"] = {"type": "categorical", "vals": [float(i + 1) for i in range(trials_n)]}
        searcher = {"name": "grid", "metric": "validation_loss", "max_concurrent_trials": 0}
    cfg = yaml.safe_load(counter_config(searcher=searcher, **hp))
    cfg["name"] = name
    return create_experiment(client, yaml.safe_dump(cfg), COUNTER)["experiment"]


def _queue(client: Client) -> list[dict]:
    return [j["full"] for j in client.get(QUEUE)["jobs"]]


def _slots_by_job(client: Client) -> dict[str, int]:
    return {j["jobId"]: j["allocatedSlots"] for j in _queue(client)}


def _held(client: Client, want: dict[str, int]) -> dict[str, int] | None:
    got = _slots_by_job(client)
    return got if all(got.get(job, 0) == n for job, n in want.items()) else None


def _log(client: Client, trial_id: int) -> str:
    """A trial's log text ("" before its first line arrives)."""
    got = client.get(f"/api/v1/trials/{trial_id}/logs")
    rows = got if isinstance(got, list) else [got] if got else []
    return "".join(r["result"]["message"] for r in rows)


def _runs(log: str) -> list[tuple[int, int]]:
    """(run, first step) of every run of a counter trial, in order."""
    return [(int(r), int(s)) for r, s in re.findall(r"run (\d+) starting at step (\d+)", log)]


def _preemptions(log: str) -> list[int]:
    return [int(s) for s in re.findall(r"preempted at step (\d+)", log)]


def _assert_resumed_after_each_preemption(client: Client, trial: dict, length: int) -> int:
    """Every preempted run was followed by one starting at its checkpoint; the steps ran once.
    Returns how many times the trial was preempted."""
    log = _log(client, trial["id"])
    runs, stops = _runs(log), _preemptions(log)
    assert runs and runs[0] == (1, 0), log
    assert len(runs) == len(stops) + 1, f"each preemption is followed by one new run:\n{log}"
    for (run, _), stop, (next_run, start) in zip(runs, stops, runs[1:], strict=False):
        assert stop > 0 and (next_run, start) == (run + 1, stop), (
            f"trial {trial['id']}: run {next_run} started at {start}, not at the checkpoint "
            f"of step {stop} where run {run} was preempted:\n{log}")
    assert training_steps(client, trial["id"]) == list(range(1, length + 1))
    assert trial["restarts"] == 0, "a preemption is not a failure"
    return len(stops)


# -- a: fair share --------------------------------------------------------------------------


@pytest.fixture
def fair_master(tmp_path: Path) -> Iterator[MasterProcess]:
    """A fair-share master with no embedded agent."""
    with _bare_master(tmp_path, "--config", str(_master_config(tmp_path, {"type": "fair_share"}))) as m:
        yield m


def _four_slots(master: MasterProcess, tmp_path: Path, agents: list[subprocess.Popen]) -> Client:
    agents += [start_agent(master, tmp_path, f"fs-{i}") for i in (1, 2)]
    client = master.admin()
    _wait_agents(client, 2)
    return client


def test_fair_share_preempts_down_to_equal_shares_and_resumes_from_checkpoints(
    fair_master: MasterProcess, tmp_path: Path, agents: list[subprocess.Popen]
) -> None:
    client = _four_slots(fair_master, tmp_path, agents)
    a = _submit(client, "a", trials_n=4, length=50, sleep=0.1, ckpt_every=5)
    wait_for(lambda: _held(client, {a["jobId"]: 4}), what="A on all 4 slots")
    b = _submit(client, "b", trials_n=4, length=15, sleep=0.1, ckpt_every=5)

    # Equal weights, equal demand (4 each): A is preempted down to 2 slots and B gets 2.
    wait_for(lambda: _held(client, {a["jobId"]: 2, b["jobId"]: 2}), timeout=60,
             what="A and B on 2 slots each")
    a_trials = trials(client, a["id"])
    wait_for(lambda: sum(bool(_preemptions(_log(client, t["id"]))) for t in a_trials) >= 2,
             what="two of A's trials checkpointed and stopped")

    assert wait_experiment(client, b["id"], DONE, timeout=120) == "STATE_COMPLETED"
    assert wait_experiment(client, a["id"], DONE, timeout=120) == "STATE_COMPLETED"
    preempted = [_assert_resumed_after_each_preemption(client, t, 50) for t in trials(client, a["id"])]
    assert sum(1 for n in preempted if n) >= 2, preempted
    for t in trials(client, b["id"]):
        _assert_resumed_after_each_preemption(client, t, 15)
    assert "Traceback" not in fair_master.log()


def test_fair_share_weights_from_the_queue_api_split_slots_three_to_one(
    fair_master: MasterProcess, tmp_path: Path, agents: list[subprocess.Popen]
) -> None:
    client = _four_slots(fair_master, tmp_path, agents)
    a = _submit(client, "a", trials_n=4, length=1000, sleep=0.05, ckpt_every=5)
    wait_for(lambda: _held(client, {a["jobId"]: 4}), what="A on all 4 slots")
    b = _submit(client, "b", trials_n=4, length=1000, sleep=0.05, ckpt_every=5)
    wait_for(lambda: _held(client, {a["jobId"]: 2, b["jobId"]: 2}), timeout=60,
             what="A and B on 2 slots each")

    client.post("/api/v1/job-queues", {"updates": [{"jobId": a["jobId"], "weight": 3}]})
    wait_for(lambda: _held(client, {a["jobId"]: 3, b["jobId"]: 1}), timeout=60,
             what="A on 3 slots and B on 1 after weights 3:1")
    by_job = {j["jobId"]: j for j in _queue(client)}
    assert (by_job[a["jobId"]]["weight"], by_job[b["jobId"]]["weight"]) == (3, 1)
    # B's trial that gave way checkpointed and is queued again, not failed.
    stopped = wait_for(lambda: [t for t in trials(client, b["id"])
                                if _preemptions(_log(client, t["id"]))], what="B's trial stopped")
    assert [(t["restarts"], t["state"]) for t in stopped] == [(0, "STATE_QUEUED")], stopped
    for exp in (a, b):
        client.post(f"/api/v1/experiments/{exp['id']}/kill")


# -- b: reordering the queue ----------------------------------------------------------------


def test_moving_a_job_ahead_changes_the_order_and_which_runs_next(tmp_path: Path) -> None:
    master = MasterProcess(tmp_path / "master", slots=1).start()
    try:
        client = master.admin()
        running = _submit(client, "running", length=1000, sleep=0.05)
        wait_for(lambda: _held(client, {running["jobId"]: 1}), what="the slot taken")
        # Really running (not still starting) before it is killed below.
        _wait_steps(client, trials(client, running["id"])[0]["id"], 1)
        x = _submit(client, "x", length=40, sleep=0.05)
        y = _submit(client, "y", length=40, sleep=0.05)
        order = [running["jobId"], x["jobId"], y["jobId"]]
        wait_for(lambda: [j["jobId"] for j in _queue(client)] == order, what="three jobs queued")

        client.post("/api/v1/job-queues", {"updates": [{"jobId": y["jobId"], "aheadOf": x["jobId"]}]})
        jobs = _queue(client)
        assert [(j["jobId"], j["summary"]["jobsAhead"]) for j in jobs] == [
            (running["jobId"], 0), (y["jobId"], 1), (x["jobId"], 2)]
        assert jobs[2]["waitReason"] == f"behind job {y['jobId']} (priority 42)"

        _bad_updates_change_nothing(client, x["jobId"], y["jobId"])

        client.post(f"/api/v1/experiments/{running['id']}/kill")
        # Y takes the freed slot while X still waits behind it.
        jobs = wait_for(lambda: (q := _queue(client)) and q[0]["jobId"] == y["jobId"]
                        and q[0]["allocatedSlots"] == 1 and q, what="Y placed")
        assert [(j["jobId"], j["summary"]["state"]) for j in jobs] == [
            (y["jobId"], "STATE_SCHEDULED"), (x["jobId"], "STATE_QUEUED")]
        for exp in (y, x):
            assert wait_experiment(client, exp["id"], DONE) == "STATE_COMPLETED"
    finally:
        master.stop()


def _order(client: Client) -> list[tuple[str, int, float, int, str]]:
    return [(j["jobId"], j["priority"], j["weight"], j["summary"]["jobsAhead"], j["summary"]["state"])
            for j in _queue(client)]


def _bad_updates_change_nothing(client: Client, x: str, y: str) -> None:
    before = _order(client)
    cases = [
        ([{"jobId": "no-such-job", "priority": 5}], 404, "job no-such-job not found"),
        ([{"jobId": x, "priority": 0}], 400, "priority must be an integer from 1 to 99, got 0"),
        ([{"jobId": x, "weight": 2}], 400, "uses the priority scheduler, which ignores weight"),
        # All or nothing: the good first update is not applied either.
        ([{"jobId": x, "priority": 5}, {"jobId": y, "aheadOf": "no-such-job"}], 404,
         "job no-such-job not found"),
    ]
    for updates, status, message in cases:
        with pytest.raises(ApiError) as err:
            client.post("/api/v1/job-queues", {"updates": updates})
        assert err.value.status == status and message in err.value.body["message"], err.value
    assert _order(client) == before


# -- c: agent loss --------------------------------------------------------------------------


class CuttableLink:
    """A TCP relay from det-agent to the master that the test can cut (both ends see the
    connection close at once, and new connections are refused) and restore on the same port."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = target_port
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._open = threading.Event()
        self._acceptor: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        listener.settimeout(0.1)
        self._open.set()
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        self._open.clear()
        assert self._acceptor is not None, "restore() opens the link first"
        self._acceptor.join()  # the listener is closed: new connections are refused
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._open.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self._target))
                except OSError:
                    client.close()
                    continue
                with self._lock:
                    self._conns += [client, upstream]
                for src, dst in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _agent_log(tmp_path: Path, agent_id: str) -> str:
    return (tmp_path / f"{agent_id}.log").read_text(errors="replace")


def _wait_steps(client: Client, trial_id: int, n: int) -> None:
    wait_for(lambda: len(training_steps(client, trial_id)) >= n, what=f"{n} steps of trial {trial_id}")


def test_agent_back_within_the_reconnect_wait_keeps_its_trial(
    tmp_path: Path, agents: list[subprocess.Popen]
) -> None:
    with _bare_master(tmp_path, "--agent-reconnect-wait", "15") as master:
        link = CuttableLink(master.port)
        link.restore()
        agents.append(start_agent(master, tmp_path, "flaky", url=link.url))
        client = master.admin()
        _wait_agents(client, 1)
        exp = _submit(client, "steady", length=60, sleep=0.1, ckpt_every=5)
        trial_id = wait_for(lambda: trials(client, exp["id"]))[0]["id"]
        _wait_steps(client, trial_id, 5)

        link.cut()
        wait_for(lambda: "lost the connection" in _agent_log(tmp_path, "flaky"),
                 what="the agent to notice the cut")
        time.sleep(2)  # an outage well inside the 15 s wait
        link.restore()
        # The master took the agent back: had it still counted it connected, hello would be 409.
        wait_for(lambda: _agent_log(tmp_path, "flaky").count("connected to the master") >= 2,
                 what="the agent to reconnect")

        assert wait_experiment(client, exp["id"], DONE) == "STATE_COMPLETED"
        trial = trials(client, exp["id"])[0]
        assert trial["restarts"] == 0
        assert _runs(_log(client, trial_id)) == [(1, 0)], "one run, never restarted"
        assert training_steps(client, trial_id) == list(range(1, 61))
        assert "asked to kill" not in _agent_log(tmp_path, "flaky")


def test_agent_lost_beyond_the_reconnect_wait_restarts_its_trial_elsewhere(
    tmp_path: Path, agents: list[subprocess.Popen]
) -> None:
    with _bare_master(tmp_path, "--agent-reconnect-wait", "10") as master:
        agents.append(start_agent(master, tmp_path, "doomed"))
        client = master.admin()
        _wait_agents(client, 1)
        exp = _submit(client, "survivor", length=60, sleep=0.1, ckpt_every=5)
        trial_id = wait_for(lambda: trials(client, exp["id"]))[0]["id"]
        _wait_steps(client, trial_id, 12)
        checkpointed = max(s for s in training_steps(client, trial_id) if s % 5 == 0)

        agents[0].send_signal(signal.SIGKILL)  # the host dies: its tasks die with the agent
        agents[0].wait(timeout=10)
        agents.append(start_agent(master, tmp_path, "spare"))
        _wait_agents(client, 2)
        # Within the wait the allocation is kept for the lost agent; the spare gets nothing.
        spare = next(a for a in client.get("/api/v1/agents")["agents"] if a["id"] == "spare")
        assert spare["numContainers"] == 0
        assert trials(client, exp["id"])[0]["restarts"] == 0

        # Beyond it the allocation fails and the trial restarts from its checkpoint on the spare.
        wait_for(lambda: [a["id"] for a in client.get("/api/v1/agents")["agents"]] == ["spare"],
                 timeout=60, what="the lost agent dropped")
        assert wait_experiment(client, exp["id"], DONE) == "STATE_COMPLETED"
        trial = trials(client, exp["id"])[0]
        assert trial["restarts"] == 1
        log = _log(client, trial_id)
        runs = _runs(log)
        assert runs[0] == (1, 0) and runs[-1][0] == 2 and runs[-1][1] >= checkpointed > 0, log
        assert training_steps(client, trial_id) == list(range(1, 61))
        assert "the master asked to kill" not in _agent_log(tmp_path, "spare")


# -- d: draining ----------------------------------------------------------------------------


def test_draining_agent_finishes_its_trial_and_takes_nothing_new_until_enabled(tmp_path: Path) -> None:
    master = MasterProcess(tmp_path / "master", slots=1).start()
    try:
        client = master.admin()
        agent_id = client.get("/api/v1/agents")["agents"][0]["id"]
        first = _submit(client, "first", length=30, sleep=0.1)
        wait_for(lambda: _held(client, {first["jobId"]: 1}), what="the first trial placed")

        got = client.post(f"/api/v1/agents/{agent_id}/disable", {"drain": True})["agent"]
        assert (got["enabled"], got["draining"]) == (False, True)
        assert all(not s["enabled"] for s in got["slots"].values())
        second = _submit(client, "second", length=5, sleep=0.02)

        assert wait_experiment(client, first["id"], DONE) == "STATE_COMPLETED"
        assert trials(client, first["id"])[0]["restarts"] == 0
        wait = "waiting for an agent of pool default to be enabled (1 disabled)"
        job = wait_for(lambda: (q := _queue(client)) and q[0].get("waitReason") == wait and q[0],
                       what="the second job's wait reason")
        assert (job["jobId"], job["summary"]["state"], job["allocatedSlots"]) == (
            second["jobId"], "STATE_QUEUED", 0)
        assert client.get("/api/v1/tasks")["allocationIdToSummary"] == {}

        got = client.post(f"/api/v1/agents/{agent_id}/enable")["agent"]
        assert (got["enabled"], got["draining"]) == (True, False)
        assert wait_experiment(client, second["id"], DONE) == "STATE_COMPLETED"
    finally:
        master.stop()
