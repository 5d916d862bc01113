"""BM-1: metrics ingestion end to end, det-jupyter vs MLflow log_batch vs a raw bulk insert.

det-jupyter: a real master (`det-jupyter up`, SQLite WAL or, with `--db-url`, a fresh
PostgreSQL database; its own agent with one slot per trial). One experiment of `trials` random-search trials runs a tiny task that writes its
DET_* environment (allocation token included) to a file and then waits; two harness client
processes (`_bm1_client.py`) then each drive half of those trials through
`det_harness.core.init()` / `report_training_metrics()`, exactly as a training script would.
Timed: from the first report() call until every point is visible over REST
(`GET /api/v1/trials/{id}/workloads`). Task launch is not timed. Visibility latency is probed
after the load: one report, then poll the workloads route until it shows (idle master).

Peer (same job, interleaved A/B/C per repetition): MLflow `log_batch` of 1,000 metrics per
call into a fresh sqlite file. Physical reference, same rows, same repetition: on SQLite
`calib.executemany_rate`; on PostgreSQL a binary COPY into an indexed row-per-value table on the
same server, one transaction (`ratio_vs_raw` is against it; `raw_reference` names it), with the
SQLite executemany still reported beside it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import (
    BENCH,
    add_db_arg,
    backend,
    bench_database,
    emit,
    libpq_url,
    log,
    median,
    median_ratio,
    peer_selected,
    percentile,
    run_peer,
    task_writable,
)
from calib import executemany_rate, rows

from tests._master import MasterProcess, create_experiment

WAIT_TASK = '''import json, os, time
d = os.environ["BM1_DIR"]
env = {k: v for k, v in os.environ.items() if k.startswith("DET_")}
p = os.path.join(d, "env-%s.json" % env["DET_TRIAL_ID"])
json.dump(env, open(p + ".tmp", "w")); os.rename(p + ".tmp", p)
deadline = time.time() + 900
while time.time() < deadline and not os.path.exists(os.path.join(d, "release")):
    time.sleep(0.1)
'''


def launch_trials(master: MasterProcess, client, work: Path, n: int) -> list[Path]:
    """Submit an experiment of n waiting trials; return their env files once all are running."""
    task_writable(work)  # the trials write their environments here
    ctx = work / "ctx"
    ctx.mkdir()
    (ctx / "wait.py").write_text(WAIT_TASK)
    cfg = {"name": "bm1", "entrypoint": "python3 wait.py", "max_restarts": 0,
           "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
           "searcher": {"name": "random", "metric": "loss", "max_trials": n,
                        "max_concurrent_trials": n, "max_length": {"batches": 1000}},
           "environment": {"environment_variables": [f"BM1_DIR={work}"]}}
    create_experiment(client, yaml.safe_dump(cfg), ctx)
    deadline = time.time() + 180
    while time.time() < deadline:
        files = sorted(glob.glob(str(work / "env-*.json")))
        if len(files) == n:
            return [Path(f) for f in files]
        time.sleep(0.2)
    raise RuntimeError(f"only {len(files)} of {n} trials started:\n{master.log()[-2000:]}")


def visible(client, trial_id: int) -> int:
    return client.get(f"/api/v1/trials/{trial_id}/workloads?limit=1")["pagination"]["total"]


def run_ours(master: MasterProcess, client, work: Path, procs: int, trials: int, steps: int) -> dict:
    files = launch_trials(master, client, work, procs * trials)
    ids = [int(json.loads(f.read_text())["DET_TRIAL_ID"]) for f in files]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "harness")}
    chunks = [files[i::procs] for i in range(procs)]
    ps = [subprocess.Popen([sys.executable, str(BENCH / "_bm1_client.py"), str(steps), *map(str, c)],
                           stdout=subprocess.PIPE, text=True, env=env) for c in chunks]
    outs = []
    for p in ps:
        out, _ = p.communicate(timeout=600)
        if p.returncode:
            raise RuntimeError(f"client exited {p.returncode}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    pending = set(ids)
    deadline = time.time() + 120
    while pending and time.time() < deadline:
        pending = {t for t in pending if visible(client, t) < steps}
        if pending:
            time.sleep(0.01)
    t_visible = time.time()
    t_first = min(o["t_first"] for o in outs)
    points = procs * trials * steps * 5
    wall = t_visible - t_first
    # Visibility probe on an idle master: report once, poll until the step shows.
    probe = probe_visibility(client, files[0], ids[0], steps, n=30)
    (work / "release").touch()
    return {"points": points, "wall_s": wall, "points_per_s": points / wall if not pending else None,
            "complete": not pending, "report_p50_us": median([o["p50_us"] for o in outs]),
            "report_p99_us": max(o["p99_us"] for o in outs),
            "acked_s": max(o["t_acked"] for o in outs) - t_first, **probe}


def probe_visibility(client, env_file: Path, trial_id: int, steps: int, n: int) -> dict:
    import det_harness as det

    os.environ.update(json.loads(env_file.read_text()))
    ctx = det.core.init(checkpoint_storage=tempfile.mkdtemp(prefix="bm1-probe-"))
    lat = []
    for i in range(n):
        before = visible(client, trial_id)
        t0 = time.perf_counter()
        ctx.train.report_training_metrics(steps_completed=steps + 1 + i, metrics={"loss": 1.0})
        deadline = t0 + 5
        while visible(client, trial_id) <= before and time.perf_counter() < deadline:
            time.sleep(0.002)
        lat.append(time.perf_counter() - t0)
    ctx.close()
    return {"visible_p50_ms": percentile(lat, 50) * 1e3, "visible_p99_ms": percentile(lat, 99) * 1e3}


def copy_rate(db_url: str, data: list[tuple[int, int, str, float]]) -> float:
    """Rows/s of one binary COPY into a fresh table indexed like calib's, one commit: the
    PostgreSQL physical reference (benchmarks.md: COPY binary + index, 318k rows/s there)."""
    import psycopg

    with psycopg.connect(libpq_url(db_url)) as conn:
        conn.execute("DROP TABLE IF EXISTS bm1_ref")
        conn.execute("CREATE TABLE bm1_ref (trial_id integer, step integer, name text, value float8)")
        conn.execute("CREATE INDEX bm1_ref_idx ON bm1_ref (trial_id, name, step)")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY bm1_ref FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "int4", "text", "float8"])
            for row in data:
                copy.write_row(row)
        conn.commit()
        rate = len(data) / (time.perf_counter() - t0)
        conn.execute("DROP TABLE bm1_ref")
        conn.commit()
    return rate


def raw_rates(db_url: str | None, data: list[tuple[int, int, str, float]], directory: str) -> dict:
    """The physical references of one repetition: SQLite executemany always, PG COPY on PG."""
    out = {"sqlite_points_per_s": executemany_rate(data, directory)}
    out["points_per_s"] = copy_rate(db_url, data) if db_url else out["sqlite_points_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--trials", type=int, default=10, help="trials per client process")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    add_db_arg(ap)
    a = ap.parse_args()
    if a.smoke:
        a.procs, a.trials, a.steps, a.reps = 1, 2, 50, 1
    peer = not a.smoke and peer_selected("mlflow")
    ours, theirs, raw = [], [], []
    with tempfile.TemporaryDirectory(prefix="bm1-") as d, bench_database(a.db_url) as db_url:
        master = MasterProcess(Path(d) / "master", slots=a.procs * a.trials, db_url=db_url).start()
        try:
            client = master.admin()
            for rep in range(a.reps):
                ours.append(run_ours(master, client, Path(d) / f"rep{rep}", a.procs, a.trials, a.steps))
                if peer:
                    theirs.append(run_peer("mlflow", "mlflow_ingest.py",
                                           ["--runs", str(a.procs * a.trials), "--steps", str(a.steps)]))
                raw.append(raw_rates(db_url, rows(a.procs * a.trials, a.steps), d))
                log(f"bm1 rep {rep}: ours {ours[-1]['points_per_s']} pts/s, "
                    f"mlflow {theirs[-1]['points_per_s'] if peer else '-'}, raw {raw[-1]['points_per_s']:.0f}")
        finally:
            master.stop()
    ok = [o["points_per_s"] or 0.0 for o in ours]
    emit({
        "bench": "bm1_ingest", "smoke": a.smoke, "db": backend(a.db_url), "peers": ["mlflow"] if peer else [],
        "points": ours[0]["points"], "points_per_s": median(ok),
        "raw_reference": ("postgresql COPY binary, row per value, indexed, 1 txn" if a.db_url
                          else "sqlite executemany, row per value, indexed, WAL, 1 txn"),
        "raw_points_per_s": median([r["points_per_s"] for r in raw]),
        "ratio_vs_raw": median_ratio(ok, [r["points_per_s"] for r in raw]),
        "raw_sqlite_points_per_s": median([r["sqlite_points_per_s"] for r in raw]),
        "ratio_vs_raw_sqlite": median_ratio(ok, [r["sqlite_points_per_s"] for r in raw]),
        "ratio_vs_mlflow": median_ratio(ok, [t["points_per_s"] for t in theirs]) if peer else None,
        "mlflow_points_per_s": median([t["points_per_s"] for t in theirs]) if peer else None,
        "report_p50_us": median([o["report_p50_us"] for o in ours]),
        "report_p99_us": median([o["report_p99_us"] for o in ours]),
        "visible_p50_ms": median([o["visible_p50_ms"] for o in ours]),
        "visible_p99_ms": max(o["visible_p99_ms"] for o in ours),
        "complete": all(o["complete"] for o in ours),
        "runs": {"ours": ours, "mlflow": theirs, "raw": raw},
    })


if __name__ == "__main__":
    main()
