"""BM-4: scheduler throughput — 5 experiments x 1,000 one-slot trials on 5 fake agents x 10 slots.

Per repetition, a fresh real master (`det-jupyter up --no-agent`; SQLite WAL, or with
`--db-url` a fresh PostgreSQL database) with env DET_MASTER_CONFIG naming a master.yaml that
asks for `resource_manager: {type: agent, scheduler: {type: fair_share}}` (what the master
ran is read back: GET /api/v1/resource-pools -> resourcePools[0].schedulerType). Untimed: the
experiments are created (random searcher, max_trials 1000, max_concurrent_trials 0, one slot
per trial) until all their allocations are PENDING. Then `_bm4_agents.py` starts, in a process of
its own: 5 agents over real websockets that answer every start_task with task_started and
task_exited (exit 0) at once. The run ends when every trial completed (bounded).

Figures (from the master's allocations table, read after the run, and its REST API):
- placements/s: allocations with start_time set (placed) / (latest start_time - the moment the
  agents sent hello). Every placement is a committed row: "persisted".
- queue -> allocated p50/p99: start_time - submitted_at over placed allocations. All requests
  are queued at once, so this includes waiting for capacity: the k-th placement cannot happen
  before k / rate seconds. Beside it, the slot idle gap p50/p99: on each agent slot, the next
  placement's start_time - the previous allocation's end_time (the master saw it exit), i.e.
  how long a freed slot stays free while requests wait.
- scheduling pass p99 at ~5k pending: from GET /api/v1/det-jupyter/scheduler-stats (admin),
  polled during the run and merged by pass number (it keeps only the last 1,000 passes), over
  passes whose snapshot had >= 80% of the queued requests pending. "not available" when the
  master does not serve it.
- fair-share deviation: GET /api/v1/job-queues-v2 sampled while every job still has pending
  work (requestedSlots > allocatedSlots) and once the first pass placed something (samples
  before that are counted, not judged), at least --sample-s apart and, as the master answers
  it on its scheduling loop, paced to take at most --sample-duty of its time
  (`sampling_busy_fraction` says how much it took). Per sample, with capacity C (all
  slots) and N jobs of equal weight, ideal = C / N; deviation = max over jobs of
  |allocatedSlots - ideal| / ideal. Reported: the max (the gate) and median over samples. Also:
  the same against the slots allocated at that instant (ideal = sum(allocatedSlots) / N), and
  from the database the placement share while every job had pending work: max over jobs of
  |placements_j / placements - 1/N| / (1/N).
- master CPU per placement: the master process's user+system CPU from the agents' start to the
  last trial's completion, / placements.

Reference, same job, on the same disk, before each repetition: SQLite WAL, synchronous=FULL,
UPDATEs of single rows of an allocations-like table: (a) one UPDATE per commit, (b) 100 UPDATEs
per commit. In the summary, rates and ratios are medians over repetitions (ratios of the same
repetition's figures); p99s and deviations are the worst repetition's; `runs` keeps each one.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from _common import (
    BENCH,
    add_db_arg,
    backend,
    bench_database,
    emit,
    log,
    master_rows,
    median,
    percentile,
)

from tests._master import MasterProcess, create_experiment, wait_for

MASTER_CONFIG = {"resource_manager": {"type": "agent", "scheduler": {"type": "fair_share"}}}
STATS_PATH = "/api/v1/det-jupyter/scheduler-stats"
HIGH_PENDING = 0.8  # a pass "at ~5k pending" saw at least this fraction of the queue pending
ALLOCATIONS_SQL = ("SELECT a.allocation_id, a.state, a.agent_id, a.slot_ids, a.submitted_at, "
                   "a.start_time, a.end_time, t.experiment_id FROM allocations a "
                   "JOIN trials t ON t.id = a.trial_id")


def experiment_config(trials: int, index: int) -> dict[str, Any]:
    """A random search of ``trials`` one-slot trials, all requested at once; never run."""
    return {
        "name": f"bm4-{index}", "entrypoint": "true", "max_restarts": 0,
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "smaller_is_better": True,
                     "max_trials": trials, "max_concurrent_trials": 0},
        "resources": {"slots_per_trial": 1},
    }


# -- pure figures ----------------------------------------------------------------------------


def share_deviation(allocated: Sequence[float], ideal: float) -> float | None:
    """max_j |allocated_j - ideal| / ideal; None when the ideal share is zero."""
    if ideal <= 0 or not allocated:
        return None
    return max(abs(a - ideal) for a in allocated) / ideal


def queue_sample(jobs: Iterable[dict[str, Any]], exp_ids: Sequence[int]) -> list[int] | None:
    """allocatedSlots per experiment (in ``exp_ids`` order) when every one of them is queued
    with pending work; None once one is gone or has nothing left to wait for. ``jobs`` are the
    ``jobs`` of GET /api/v1/job-queues-v2 (each a ``{"full": v1Job}``)."""
    by_exp = {int(j["entityId"]): j for j in (item.get("full", item) for item in jobs)}
    out = []
    for exp_id in exp_ids:
        job = by_exp.get(exp_id)
        if job is None or int(job["requestedSlots"]) <= int(job["allocatedSlots"]):
            return None
        out.append(int(job["allocatedSlots"]))
    return out


def placement_share_deviation(rows: Sequence[dict[str, Any]]) -> tuple[float | None, int]:
    """Over the placements made while every experiment still had requests waiting (until the
    first one's last placement): max_j |share_j - 1/N| / (1/N), and how many placements."""
    by_exp: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        if r["start_time"] is not None:
            by_exp[r["experiment_id"]].append(r["start_time"])
    if not by_exp:
        return None, 0
    end = min(max(starts) for starts in by_exp.values())
    counts = [sum(1 for s in starts if s <= end) for starts in by_exp.values()]
    total = sum(counts)
    return share_deviation([c / total for c in counts], 1 / len(counts)), total


def slot_idle_gaps(rows: Sequence[dict[str, Any]]) -> list[float]:
    """Per agent slot, in placement order: next start_time - previous end_time (seconds)."""
    by_slot: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["start_time"] is None or r["agent_id"] is None:
            continue
        ids = r["slot_ids"]
        for slot in json.loads(ids) if isinstance(ids, str) else ids or []:
            by_slot[(r["agent_id"], slot)].append(r)
    gaps = []
    for runs in by_slot.values():
        runs.sort(key=lambda r: r["start_time"])
        gaps += [b["start_time"] - a["end_time"] for a, b in zip(runs, runs[1:], strict=False)
                 if a["end_time"] is not None]
    return gaps


def merge_passes(into: dict[int, dict[str, Any]], stats: dict[str, Any]) -> None:
    """Add the recent passes of one scheduler-stats answer, numbered 1..passes."""
    recent = stats.get("recentPasses") or []
    first = int(stats.get("passes", len(recent))) - len(recent) + 1
    for i, p in enumerate(recent):
        into[first + i] = p


# -- I/O -------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def update_rate(directory: str, per_commit: int, updates: int, max_s: float, rows: int = 5000) -> float:
    """UPDATEs/s of single rows of an allocations-like table, ``per_commit`` per commit,
    SQLite WAL with synchronous=FULL (each commit fsynced)."""
    path = os.path.join(directory, f"ref-{time.monotonic_ns()}.db")
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE allocations (allocation_id TEXT PRIMARY KEY, state TEXT NOT NULL, "
                    "agent_id TEXT, slot_ids TEXT, submitted_at REAL NOT NULL, start_time REAL)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO allocations VALUES (?, 'PENDING', NULL, NULL, ?, NULL)",
                        [(f"1.{i}.1", time.time()) for i in range(rows)])
        con.execute("COMMIT")
        done, t0 = 0, time.perf_counter()
        while done < updates and time.perf_counter() - t0 < max_s:
            con.execute("BEGIN")
            for _ in range(per_commit):
                con.execute("UPDATE allocations SET state='ASSIGNED', agent_id=?, slot_ids=?, "
                            "start_time=? WHERE allocation_id=?",
                            ("agent-0", f"[{done % 10}]", time.time(), f"1.{done % rows}.1"))
                done += 1
            con.execute("COMMIT")
        return done / (time.perf_counter() - t0)
    finally:
        con.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


class Http:
    """GETs over one keep-alive connection with the admin token; (status, parsed body)."""

    def __init__(self, url: str, token: str) -> None:
        self.conn = http.client.HTTPConnection(url.split("://", 1)[1].split("/", 1)[0], timeout=60)
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str) -> tuple[int, Any]:
        self.conn.request("GET", path, headers=self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, None

    def close(self) -> None:
        self.conn.close()


@dataclass(frozen=True)
class Observed:
    """What one repetition saw, before any figure is computed."""

    rows: list[dict[str, Any]]  # our experiments' allocations, from the database
    fake: dict[str, Any]  # the fake agents' own summary
    samples: list[list[int]]  # allocatedSlots per experiment, per judged job-queue sample
    early: int  # job-queue samples taken before the first placement (not judged)
    sample_ms: list[float]  # how long each job-queue request took
    passes: dict[int, dict[str, Any]]  # scheduler-stats passes by number
    stats_note: str | None  # None when scheduler-stats answered, else why not
    scheduler_type: str | None
    cpu_s: float  # master CPU from the agents' start to the last completion
    create_s: float
    complete: bool


class Sampler:
    """Polls scheduler-stats (every call) and job-queues-v2 (paced) while the agents run."""

    def __init__(self, http_: Http, exp_ids: list[int], every_s: float, duty: float) -> None:
        self.http, self.exp_ids, self.every_s, self.duty = http_, exp_ids, every_s, duty
        self.passes: dict[int, dict[str, Any]] = {}
        self.samples: list[list[int]] = []
        self.sample_ms: list[float] = []
        self.early = 0
        self._window_open, self._next_sample = True, 0.0
        status, body = http_.get(STATS_PATH)
        self.stats_ok = status == 200 and isinstance(body, dict) and "recentPasses" in body
        self.stats_note = None if self.stats_ok else f"not available (GET {STATS_PATH} answered HTTP {status})"
        if self.stats_ok:
            merge_passes(self.passes, body)

    def poll_stats(self) -> None:
        if self.stats_ok:
            status, body = self.http.get(STATS_PATH)
            if status == 200:
                merge_passes(self.passes, body)

    def tick(self) -> None:
        self.poll_stats()
        if not self._window_open or time.time() < self._next_sample:
            return
        t0 = time.perf_counter()
        status, body = self.http.get("/api/v1/job-queues-v2")
        took = time.perf_counter() - t0
        self.sample_ms.append(took * 1e3)
        sample = queue_sample(body.get("jobs", []), self.exp_ids) if status == 200 else None
        self._window_open = sample is not None
        if sample is not None and (self.samples or sum(sample)):
            self.samples.append(sample)
        elif sample is not None:
            self.early += 1  # the first pass has not placed anything yet: nothing is shared
        # The master answers the queue on its scheduling loop: keep our samples to at most
        # `duty` of its time.
        self._next_sample = time.time() + max(self.every_s, took * (1 / self.duty - 1))


def run_rep(a: argparse.Namespace, work: Path, db_url: str | None) -> dict[str, Any]:
    """One fresh master, the queue, the agents, the figures."""
    total = a.experiments * a.trials
    work.mkdir(parents=True)
    (work / "master.yaml").write_text(yaml.safe_dump(MASTER_CONFIG))
    token = os.urandom(16).hex()
    env = {"DET_MASTER_CONFIG": str(work / "master.yaml"), "DET_AGENT_TOKEN": token}
    master = MasterProcess(work / "master", db_url=db_url, env=env, extra_args=["--no-agent"]).start()
    agents: subprocess.Popen[str] | None = None
    try:
        client = master.admin()
        t_create = time.time()
        exp_ids = [create_experiment(client, yaml.safe_dump(experiment_config(a.trials, i)), None)
                   ["experiment"]["id"] for i in range(a.experiments)]
        pending_sql = "SELECT count(*) AS n FROM allocations WHERE state = 'PENDING'"
        wait_for(lambda: master_rows(master, pending_sql)[0]["n"] >= total, timeout=a.timeout,
                 interval=0.1, what=f"{total} pending allocations")
        create_s = time.time() - t_create
        http_ = Http(master.url, client.token)
        sampler = Sampler(http_, exp_ids, a.sample_s, a.sample_duty)
        cpu0 = cpu_seconds(master.proc.pid)
        agents = subprocess.Popen(
            [sys.executable, str(BENCH / "_bm4_agents.py"), "--url", master.url, "--agents", str(a.agents),
             "--slots", str(a.slots), "--expect", str(total), "--timeout", str(a.timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "DET_AGENT_TOKEN": token})
        deadline = time.time() + a.timeout
        while agents.poll() is None and time.time() < deadline:
            status, body = http_.get("/api/v1/agents")
            if status == 200 and len(body["agents"]) >= a.agents:
                break
            time.sleep(0.01)
        _, pools = http_.get("/api/v1/resource-pools")
        scheduler_type = (pools.get("resourcePools") or [{}])[0].get("schedulerType")
        while agents.poll() is None and time.time() < deadline:
            tick = time.time()
            sampler.tick()
            time.sleep(max(0.0, a.sample_s - (time.time() - tick)))
        out, err = agents.communicate(timeout=60)
        if agents.returncode != 0:
            raise RuntimeError(f"fake agents exited {agents.returncode}:\n{err[-3000:]}")
        done_sql = ("SELECT count(*) AS n FROM experiments WHERE state = 'COMPLETED' AND id IN ("
                    + ",".join(str(i) for i in exp_ids) + ")")
        try:
            wait_for(lambda: master_rows(master, done_sql)[0]["n"] == len(exp_ids), timeout=a.timeout,
                     interval=0.1, what="all experiments completed")
            complete = True
        except AssertionError:
            complete = False
        cpu = cpu_seconds(master.proc.pid) - cpu0
        sampler.poll_stats()
        http_.close()
        rows = [r for r in master_rows(master, ALLOCATIONS_SQL) if r["experiment_id"] in exp_ids]
    finally:
        if agents is not None and agents.poll() is None:
            agents.kill()
            agents.wait(timeout=30)
        master.stop()
    return figures(a, Observed(
        rows=rows, fake=json.loads(out.strip().splitlines()[-1]), samples=sampler.samples,
        early=sampler.early, sample_ms=sampler.sample_ms, passes=sampler.passes,
        stats_note=sampler.stats_note, scheduler_type=scheduler_type, cpu_s=cpu,
        create_s=create_s, complete=complete))


def figures(a: argparse.Namespace, o: Observed) -> dict[str, Any]:
    """One repetition's figures (see the module docstring for each definition)."""
    total = a.experiments * a.trials
    placed = [r for r in o.rows if r["start_time"] is not None]
    last = max((r["start_time"] for r in placed), default=None)
    span = last - o.fake["first_hello"] if last is not None else None
    q2a = [r["start_time"] - r["submitted_at"] for r in placed]
    gaps = slot_idle_gaps(o.rows)
    capacity = a.agents * a.slots
    dev = [share_deviation(s, capacity / a.experiments) for s in o.samples]
    dev_alloc = [d for s in o.samples if (d := share_deviation(s, sum(s) / len(s))) is not None]
    place_dev, place_n = placement_share_deviation(o.rows)
    all_ms = [float(p["ms"]) for p in o.passes.values()]
    high_ms = [float(p["ms"]) for p in o.passes.values() if p.get("pending", 0) >= HIGH_PENDING * total]

    def p(values: list[float], q: float, scale: float = 1e3) -> float | None:
        return percentile(values, q) * scale if values else None

    return {
        "scheduler_type": o.scheduler_type, "placements": len(placed), "allocations": len(o.rows),
        "complete": o.complete and len(placed) == total and o.fake["starts"] == total,
        "create_s": o.create_s, "placement_span_s": span,
        "placements_per_s": len(placed) / span if span else None,
        "queue_to_alloc_p50_ms": p(q2a, 50), "queue_to_alloc_p99_ms": p(q2a, 99),
        "slot_idle_gap_p50_ms": p(gaps, 50), "slot_idle_gap_p99_ms": p(gaps, 99),
        "pass_stats": o.stats_note or "ok", "passes_seen": len(o.passes),
        "passes_high_pending": len(high_ms),
        "pass_p99_ms": p(high_ms, 99, 1.0), "pass_p50_ms": p(high_ms, 50, 1.0),
        "pass_p99_all_ms": p(all_ms, 99, 1.0),
        # The decision alone: reading the queue and running the policy, before any writes.
        "decision_p99_ms": p([float(q.get("snapshotMs", 0.0)) + float(q.get("decideMs", 0.0))
                              for q in o.passes.values() if q.get("pending", 0) >= HIGH_PENDING * total],
                             99, 1.0),
        **{f"pass_{part}_p50_ms": p([float(q.get(f"{part}Ms", 0.0)) for q in o.passes.values()
                                     if q.get("pending", 0) >= HIGH_PENDING * total], 50, 1.0)
           for part in ("snapshot", "decide", "apply")},
        "fair_share_samples": len(o.samples), "fair_share_samples_before_first_placement": o.early,
        "fair_share_dev_max": max(d for d in dev if d is not None) if dev else None,
        "fair_share_dev_median": median([d for d in dev if d is not None]),
        "fair_share_dev_of_allocated_max": max(dev_alloc) if dev_alloc else None,
        "fair_share_allocated_median": median([float(sum(s)) for s in o.samples]),
        "placement_share_dev": place_dev, "placement_share_n": place_n,
        "sample_ms_p50": median(o.sample_ms),
        "sampling_busy_fraction": sum(o.sample_ms) / 1e3 / span if span else None,
        "master_cpu_s": o.cpu_s,
        "master_cpu_ms_per_placement": o.cpu_s / len(placed) * 1e3 if placed else None,
        "agents": {k: o.fake[k] for k in ("starts", "kills", "bad_slot_ids", "per_agent", "cpu_s", "timed_out")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="2 experiments x 20 trials, 2 agents x 2 slots, 1 rep")
    ap.add_argument("--experiments", type=int, default=5)
    ap.add_argument("--trials", type=int, default=1000, help="trials per experiment")
    ap.add_argument("--agents", type=int, default=5)
    ap.add_argument("--slots", type=int, default=10, help="slots per agent")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sample-s", type=float, default=0.25,
                    help="shortest interval between job-queue samples and scheduler-stats polls (s)")
    ap.add_argument("--sample-duty", type=float, default=0.1,
                    help="most of the master's time the job-queue samples may take (0..1]")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound on each wait (s)")
    add_db_arg(ap)
    a = ap.parse_args()
    if a.smoke:
        a.experiments, a.trials, a.agents, a.slots, a.reps = 2, 20, 2, 2, 1
        a.sample_s, a.sample_duty = 0.02, 0.5
        a.timeout = min(a.timeout, 60.0)
    for name in ("experiments", "trials", "agents", "slots", "reps"):
        if getattr(a, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(a, name)}")
    if not 0 < a.sample_duty <= 1:
        raise ValueError(f"--sample-duty must be in (0, 1], got {a.sample_duty}")
    ref_n = (50, 1000) if a.smoke else (2000, 50_000)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bm4-") as d, bench_database(a.db_url) as db_url:
        for rep in range(a.reps):
            ref_a = update_rate(d, 1, ref_n[0], max_s=3.0)
            ref_b = update_rate(d, 100, ref_n[1], max_s=3.0)
            r = run_rep(a, Path(d) / f"rep{rep}", db_url)
            r.update(ref_a_updates_per_s=ref_a, ref_b_updates_per_s=ref_b)
            runs.append(r)
            log(f"bm4 rep {rep}: {r['placements']} placements, {r['placements_per_s']} /s "
                f"(ref a {ref_a:.0f}/s, b {ref_b:.0f}/s), q->alloc p99 {r['queue_to_alloc_p99_ms']} ms, "
                f"pass p99 {r['pass_p99_ms']} ms ({r['pass_stats']}), share dev max "
                f"{r['fair_share_dev_max']} over {r['fair_share_samples']} samples, "
                f"scheduler {r['scheduler_type']}")

    def med(key: str) -> float | None:
        return median([r[key] for r in runs if r[key] is not None])

    def worst(key: str) -> float | None:
        values = [r[key] for r in runs if r[key] is not None]
        return max(values) if values else None

    def ratio(ref: str) -> float | None:
        return median([r["placements_per_s"] / r[ref] for r in runs if r["placements_per_s"] and r[ref]])

    emit({
        "bench": "bm4_scheduler", "smoke": a.smoke, "db": backend(a.db_url), "peers": [],
        "experiments": a.experiments, "trials_per_experiment": a.trials, "agents": a.agents,
        "slots_per_agent": a.slots, "reps": a.reps,
        "scheduler_type": runs[0]["scheduler_type"], "complete": all(r["complete"] for r in runs),
        "placements_per_s": med("placements_per_s"),
        "ref_a_updates_per_s": med("ref_a_updates_per_s"), "ref_b_updates_per_s": med("ref_b_updates_per_s"),
        "reference": "sqlite WAL synchronous=FULL single-row UPDATEs: (a) 1 per commit, (b) 100 per commit",
        "ratio_vs_ref_a": ratio("ref_a_updates_per_s"), "ratio_vs_ref_b": ratio("ref_b_updates_per_s"),
        "queue_to_alloc_p50_ms": med("queue_to_alloc_p50_ms"), "queue_to_alloc_p99_ms": worst("queue_to_alloc_p99_ms"),
        "slot_idle_gap_p50_ms": med("slot_idle_gap_p50_ms"), "slot_idle_gap_p99_ms": worst("slot_idle_gap_p99_ms"),
        "pass_stats": runs[0]["pass_stats"], "pass_p99_ms": worst("pass_p99_ms"),
        "pass_p99_all_ms": worst("pass_p99_all_ms"), "decision_p99_ms": worst("decision_p99_ms"),
        "fair_share_samples": sum(r["fair_share_samples"] for r in runs),
        "fair_share_dev_max": worst("fair_share_dev_max"), "fair_share_dev_median": med("fair_share_dev_median"),
        "fair_share_dev_of_allocated_max": worst("fair_share_dev_of_allocated_max"),
        "placement_share_dev": worst("placement_share_dev"),
        "fair_share_allocated_median": med("fair_share_allocated_median"),
        "sampling_busy_fraction": med("sampling_busy_fraction"),
        "pass_p50_ms": med("pass_p50_ms"),
        "master_cpu_ms_per_placement": med("master_cpu_ms_per_placement"),
        "create_s": med("create_s"),
        "runs": runs,
    })


if __name__ == "__main__":
    main()
