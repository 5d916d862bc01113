"""BM-5 peer: MLflow get_metric_history (Q1) and search_runs (Q3) (bench/.venv-mlflow).

Loads runs x steps x 5 metrics with log_batch (untimed), prints {"loaded": ...}, then for
every line "round" on stdin runs Q1 and Q3 `n` times and prints one JSON line of p50s, so
the driver can interleave its own rounds between ours without reloading.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time

NAMES = ("loss", "acc", "lr", "grad_norm", "throughput")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--n", type=int, default=50)
    a = ap.parse_args()
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    d = tempfile.mkdtemp(prefix="bm5-mlflow-")
    client = MlflowClient(tracking_uri=f"sqlite:///{os.path.join(d, 'mlflow.db')}")
    exp = client.create_experiment("bm5")
    runs = []
    t0 = time.perf_counter()
    now = int(time.time() * 1000)
    for _ in range(a.runs):
        rid = client.create_run(exp).info.run_id
        runs.append(rid)
        ms = [Metric(n, 1.0 / s + i, now, s) for s in range(1, a.steps + 1) for i, n in enumerate(NAMES)]
        for k in range(0, len(ms), 1000):
            client.log_batch(rid, metrics=ms[k:k + 1000])
    print(json.dumps({"loaded": a.runs * a.steps * 5, "load_s": time.perf_counter() - t0}), flush=True)
    gc.collect()
    gc.freeze()  # as the driver does: the collector no longer walks the start-up objects
    for line in sys.stdin:
        if line.strip() != "round":
            break
        q1, q3 = [], []
        for i in range(a.n):
            t = time.perf_counter()
            hist = client.get_metric_history(runs[i % len(runs)], "loss")
            q1.append(time.perf_counter() - t)
            assert len(hist) == a.steps
            t = time.perf_counter()
            found = client.search_runs([exp], max_results=1000)
            q3.append(time.perf_counter() - t)
            assert len(found) == a.runs
        print(json.dumps({"q1_p50_ms": statistics.median(q1) * 1e3,
                          "q3_p50_ms": statistics.median(q3) * 1e3}), flush=True)


if __name__ == "__main__":
    main()
