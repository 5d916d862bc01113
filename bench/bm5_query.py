"""BM-5: metrics query latency over REST, det-jupyter vs MLflow, with a raw-SQL reference.

Setup (untimed): a real master with `--no-agent` (SQLite, or with `--db-url` a fresh
PostgreSQL database) creates one experiment of `trials` random trials (they stay queued; no
task runs); the master is stopped and the metrics are bulk-loaded into its database through
`MetricService.ingest` (the code path the REST ingest route uses), first `steps/10` steps
(copied then, to measure Q3 at 1/10 of the data), then the rest. Timed, `n` times each, p50: Q1 = one
trial's full history of one metric,
`GET /api/v1/trials/time-series?trialIds=T&metricNames=M&group=training` (0.38.1's
CompareTrials route; also reported: the whole `workloads` history of all 5 metrics; the 50
requests go round the trials, as MLflow's go round its runs), Q2 = all
trials, one metric, downsampled to <= 200 points each (the same route with every trial id and
`maxDatapoints=200`), Q3 = `GET /api/v1/experiments/{id}/trials` (the experiment table,
summaries included), also at a tenth of the data: a second master serves a copy of the database
taken once the first tenth was loaded, and both are timed in every round, request by request in
turn (growth: the median of the rounds' ratios). Q4: with the master up, one more step per trial
is ingested into the same database and Q3 must show it at once. Raw reference: the same rows read with the same query
straight from the database, no HTTP (`sqlite3` on the file; psycopg on PostgreSQL).
Peer: MLflow get_metric_history / search_runs (peers/mlflow_query.py), interleaved per round.

Two timings per query, over one keep-alive connection: `q*_ms` is the HTTP request duration
(request sent → whole body received, what k6 calls http_req_duration) — the figure the latency
targets are about; `q*_parsed_ms` adds `json.loads` of the body, the data in the client's hands,
which is what the ratios to MLflow (whose API returns objects) and to raw SQL use. Both this
driver and the MLflow peer freeze their start-up objects out of the garbage collector before
timing (``gc.freeze``), so neither client's parse pays for walking its own imported modules.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import itertools
import json
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from _common import (
    BENCH,
    add_db_arg,
    backend,
    bench_database,
    database_copy,
    emit,
    libpq_url,
    log,
    median,
    median_ratio,
    peer_python,
    peer_selected,
)

from det_jupyter.services.common.clock import Clock
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store import make_engine, sqlite_url
from tests._master import MasterProcess, create_experiment

NAMES = ("loss", "acc", "lr", "grad_norm", "throughput")


def load(db_url: str, trial_ids: list[int], lo: int, hi: int) -> None:
    engine = make_engine(db_url)
    svc = MetricService(engine, Clock())
    now = time.time()
    for tid in trial_ids:
        reports = [Report("training", s, {n: 1.0 / s + i for i, n in enumerate(NAMES)}, now)
                   for s in range(lo, hi + 1)]
        for k in range(0, len(reports), 500):
            svc.ingest(tid, None, reports[k:k + 500])
    engine.dispose()


class RawDb:
    """Q1 and Q3 as plain SQL on the master's database: the reference without HTTP."""

    def __init__(self, db_url: str | None, sqlite_file: Path) -> None:
        if db_url:
            import psycopg

            self.con = psycopg.connect(libpq_url(db_url), autocommit=True)
            self.q1_sql = ("SELECT steps_completed, report_time, CAST(body AS json) -> %s FROM metrics "
                           "WHERE trial_id=%s AND mgroup='training' AND NOT archived ORDER BY steps_completed")
            self.name = NAMES[0]
            self.q3_sql = "SELECT id, CAST(summary AS text) FROM trials WHERE experiment_id=%s"
        else:
            self.con = sqlite3.connect(str(sqlite_file))
            self.q1_sql = ("SELECT steps_completed, report_time, json_extract(body, ?) FROM metrics "
                           "WHERE trial_id=? AND mgroup='training' AND archived=0 ORDER BY steps_completed")
            self.name = f'$."{NAMES[0]}"'
            self.q3_sql = "SELECT id, summary FROM trials WHERE experiment_id=?"

    def q1(self, trial_id: int) -> list:
        return self.con.execute(self.q1_sql, (self.name, trial_id)).fetchall()

    def q3(self, exp_id: int) -> list:
        return [json.loads(s) for _, s in self.con.execute(self.q3_sql, (exp_id,)).fetchall()]

    def close(self) -> None:
        self.con.close()


class Http:
    """GETs over one keep-alive connection, as a UI's client would make them."""

    def __init__(self, url: str, token: str) -> None:
        self.conn = http.client.HTTPConnection(url.split("://", 1)[1].split("/", 1)[0], timeout=60)
        self.headers = {"Authorization": f"Bearer {token}"}

    def body(self, path: str) -> bytes:
        self.conn.request("GET", path, headers=self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        assert resp.status == 200, (resp.status, data[:200])
        return data

    def json(self, path: str) -> object:
        return json.loads(self.body(path))


def q1_series(trial_id: int) -> str:
    return f"/api/v1/trials/time-series?trialIds={trial_id}&metricNames={NAMES[0]}&group=training"


def cycle_from(items: list, start: int, fn):
    """A call taking no argument that applies ``fn`` to the next of ``items``, from ``start``."""
    it = itertools.islice(itertools.cycle(items), start % len(items), None)
    return lambda: fn(next(it))


def timed(fn, n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return median(out) * 1e3


def timed_alternately(a, b, n: int) -> tuple[float, float]:
    """The p50s in ms of ``a`` and ``b``, called in turn ``n`` times each, which one goes first
    alternating: a pair whose ratio is read stays side by side while the machine drifts."""
    out: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            (a, b)[k]()
            out[k].append(time.perf_counter() - t)
    return median(out[0]) * 1e3, median(out[1]) * 1e3


def queued_experiment(data_dir: Path, db_url: str | None, trials: int,
                      steps: int) -> tuple[MasterProcess, int, list[int]]:
    """A master (no agent), stopped again, whose database holds one experiment of ``trials``
    queued trials of up to ``steps`` batches: the master, the experiment's id, its trial ids."""
    master = MasterProcess(data_dir, db_url=db_url, extra_args=["--no-agent"]).start()
    cfg = {"name": "bm5", "entrypoint": "true", "max_restarts": 0,
           "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
           "searcher": {"name": "random", "metric": "loss", "max_trials": trials,
                        "max_concurrent_trials": trials, "max_length": {"batches": steps}}}
    client = master.admin()
    exp_id = create_experiment(client, yaml.safe_dump(cfg), None)["experiment"]["id"]
    tids = [t["id"] for t in client.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]]
    assert len(tids) == trials, f"expected {trials} trials, got {len(tids)}"
    master.stop()
    return master, exp_id, tids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    add_db_arg(ap)
    a = ap.parse_args()
    if a.smoke:
        a.trials, a.steps, a.n, a.reps = 5, 50, 5, 1
    peer = not a.smoke and peer_selected("mlflow") and peer_python("mlflow") is not None
    with tempfile.TemporaryDirectory(prefix="bm5-") as d, bench_database(a.db_url) as pg_url, \
            contextlib.ExitStack() as stack:
        master, exp_id, tids = queued_experiment(Path(d) / "m", pg_url, a.trials, a.steps)
        sqlite_file = Path(d) / "m" / "det.db"
        db = pg_url or sqlite_url(str(sqlite_file))
        small = max(1, a.steps // 10)
        t0 = time.perf_counter()
        load(db, tids, 1, small)
        # Q3 at a tenth of the data is served by a second master from a copy made now, so both
        # sizes are timed in every round, side by side.
        small_copy = stack.enter_context(database_copy(pg_url, Path(d) / "m", Path(d) / "m-small"))
        load(db, tids, small + 1, a.steps)
        log(f"bm5 loaded {a.trials * a.steps * 5} points in {time.perf_counter() - t0:.1f}s")
        small_master = MasterProcess(Path(d) / "m-small", db_url=small_copy, extra_args=["--no-agent"]).start()
        stack.callback(small_master.stop)
        small_web = Http(small_master.url, small_master.admin().token)
        q3_path = f"/api/v1/experiments/{exp_id}/trials"
        master.start()
        client = master.admin()
        raw = RawDb(pg_url, sqlite_file)
        mlf = None
        if peer:
            mlf = subprocess.Popen([str(peer_python("mlflow")), str(BENCH / "peers" / "mlflow_query.py"),
                                    "--n", str(a.n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            log("bm5 mlflow load", mlf.stdout.readline().strip())
        rounds = []
        web = Http(master.url, client.token)
        # The driver's own modules and setup objects are frozen out of the collector's passes:
        # a UI's client holds none of them, and with them each body's parse paid for walking
        # them (1.1 → 2-3 ms for Q1's 89 kB). The MLflow peer does the same after its load.
        gc.collect()
        gc.freeze()
        try:
            for rep in range(a.reps):
                tid = tids[rep % len(tids)]
                got = client.get(q1_series(tid))["trials"][0]["metrics"][0]["data"]
                assert len(got) == a.steps, len(got)
                q2_path = ("/api/v1/trials/time-series?" + "&".join(f"trialIds={t}" for t in tids)
                           + f"&metricNames={NAMES[0]}&group=training&maxDatapoints=200")
                q2 = client.get(q2_path)["trials"]
                assert len(q2) == len(tids) and all(len(tr["metrics"][0]["data"]) <= 200 for tr in q2)
                # Q1 goes round the trials (as MLflow's Q1 goes round its runs): one trial asked
                # 50 times in a row would measure a server's repeat of the same request.
                q1 = cycle_from(tids, rep * a.n, lambda t: web.body(q1_series(t)))
                q1_parsed = cycle_from(tids, rep * a.n, lambda t: web.json(q1_series(t)))
                q1_workloads = cycle_from(tids, rep * a.n, lambda t: web.json(f"/api/v1/trials/{t}/workloads"))
                q1_raw = cycle_from(tids, rep * a.n, raw.q1)
                # Q3 at both sizes in turn, request by request: their ratio is the growth.
                q3_small_ms, q3_ms = timed_alternately(lambda: small_web.body(q3_path), lambda: web.body(q3_path), a.n)
                r = {
                    "q1_ms": timed(q1, a.n),
                    "q1_parsed_ms": timed(q1_parsed, a.n),
                    "q1_workloads_ms": timed(q1_workloads, a.n),
                    "q2_ms": timed(lambda p=q2_path: web.body(p), a.n),
                    "q2_parsed_ms": timed(lambda p=q2_path: web.json(p), a.n),
                    "q3_small_ms": q3_small_ms,
                    "q3_ms": q3_ms,
                    "q3_parsed_ms": timed(lambda: web.json(q3_path), a.n),
                    "q1_raw_ms": timed(q1_raw, a.n),
                    "q3_raw_ms": timed(lambda: raw.q3(exp_id), a.n),
                }
                if mlf:
                    mlf.stdin.write("round\n")
                    mlf.stdin.flush()
                    r.update({f"mlflow_{k}": v for k, v in json.loads(mlf.stdout.readline()).items()})
                rounds.append(r)
                log(f"bm5 round {rep}: {r}")
            # Q4: one more step per trial while the master is up; Q3 must show it at once.
            load(db, tids, a.steps + 1, a.steps + 1)
            t = time.perf_counter()
            trials = client.get(q3_path)["trials"]
            q4_ms = (time.perf_counter() - t) * 1e3
            fresh = all(tr.get("totalBatchesProcessed") == a.steps + 1 for tr in trials)
        finally:
            if mlf:
                mlf.stdin.close()
                mlf.wait(timeout=30)
            raw.close()
            master.stop()
    med = {k: median([r[k] for r in rounds]) for k in rounds[0]}
    emit({
        "bench": "bm5_query", "smoke": a.smoke, "db": backend(a.db_url), "peers": ["mlflow"] if peer else [],
        "points": a.trials * a.steps * 5, **med,
        "q3_growth_10x": median([r["q3_ms"] / r["q3_small_ms"] for r in rounds]),
        "q1_vs_raw_x": med["q1_parsed_ms"] / med["q1_raw_ms"],
        "q4_ms": q4_ms, "q4_fresh": fresh,
        "ratio_q1_vs_mlflow": median_ratio([r["q1_parsed_ms"] for r in rounds], [r["mlflow_q1_p50_ms"] for r in rounds],
                                           higher_is_better=False) if peer else None,
        "ratio_q3_vs_mlflow": median_ratio([r["q3_parsed_ms"] for r in rounds], [r["mlflow_q3_p50_ms"] for r in rounds],
                                           higher_is_better=False) if peer else None,
        "rounds": rounds,
    })


if __name__ == "__main__":
    main()
