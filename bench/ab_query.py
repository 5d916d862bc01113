"""A/B of one REST query between two versions of the master, on one machine, interleaved.

Benchmarks on a shared or noisy machine drift by more than a change is worth between two runs;
this compares a revision with the working tree in one run. It checks out ``--old`` (a git
revision) into a temporary worktree, builds one database as BM-5 does (``--trials`` queued
trials with ``--steps`` reports of 5 metrics, loaded through ``MetricService.ingest``), copies
it, and starts two masters (``--no-agent``), each on its copy and importing its own tree. Then
``--n`` requests go to each, alternating which goes first, over kept-alive connections: by
default BM-5's Q1 (one trial's whole history of one metric, the trials in turn). Every answer
of the two must be the same JSON. The summary: each side's p50 in ms and the median of the
per-pair ratios new/old (below 1: the working tree is faster)::

    .venv/bin/python bench/ab_query.py --old HEAD~1 [--db-url postgresql://postgres@127.0.0.1:5432/test]
    .venv/bin/python bench/ab_query.py --old HEAD~1 --trial-ids 5 --query '/api/v1/trials/time-series?{ids}&metricNames=loss&group=training'
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import subprocess
import tempfile
import time
from pathlib import Path

from _common import REPO, add_db_arg, bench_database, database_copy, emit, log, median
from bm5_query import load, queued_experiment

from det_jupyter.store import sqlite_url
from tests._master import MasterProcess

Q1 = "/api/v1/trials/time-series?{ids}&metricNames=loss&group=training"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the git revision to compare the working tree with")
    ap.add_argument("--query", default=Q1, help="the path asked; {ids} becomes trialIds=… of --trial-ids trials")
    ap.add_argument("--trial-ids", type=int, default=1)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--n", type=int, default=2000)
    add_db_arg(ap)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ab-") as d, bench_database(a.db_url) as pg_url, \
            contextlib.ExitStack() as stack:
        old_tree = Path(d) / "old"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-f", "--detach", str(old_tree), a.old],
                       check=True, capture_output=True)
        stack.callback(subprocess.run, ["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)],
                       capture_output=True)
        _, _, tids = queued_experiment(Path(d) / "new", pg_url, a.trials, a.steps)
        load(pg_url or sqlite_url(str(Path(d) / "new" / "det.db")), tids, 1, a.steps)
        old_url = stack.enter_context(database_copy(pg_url, Path(d) / "new", Path(d) / "old-data"))
        sides: dict[str, tuple[MasterProcess, http.client.HTTPConnection, dict[str, str]]] = {}
        for side, tree, data, url in (("old", old_tree, Path(d) / "old-data", old_url),
                                      ("new", REPO, Path(d) / "new", pg_url)):
            # `python -m` puts the working directory first on sys.path: each master imports
            # its own tree.
            m = MasterProcess(data, db_url=url, extra_args=["--no-agent"], env={"PYTHONPATH": str(tree)},
                              cwd=tree).start()
            stack.callback(m.stop)
            conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=30)
            sides[side] = (m, conn, {"Authorization": f"Bearer {m.admin().token}"})

        def ask(side: str, i: int) -> bytes:
            _, conn, headers = sides[side]
            ids = "&".join(f"trialIds={tids[(i + j) % len(tids)]}" for j in range(a.trial_ids))
            conn.request("GET", a.query.format(ids=ids), headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise SystemExit(f"{side}: {resp.status} {body[:300]!r}")
            return body

        gc.collect()
        gc.freeze()
        for i in range(min(200, a.n)):  # warm: connections, caches, prepared statements
            for side in sides:
                ask(side, i)
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(a.n):
            answers = {}
            for side in (("old", "new") if i % 2 else ("new", "old")):
                t0 = time.perf_counter()
                answers[side] = ask(side, i)
                times[side].append((time.perf_counter() - t0) * 1e3)
            if i % 100 == 0 and json.loads(answers["old"]) != json.loads(answers["new"]):
                raise SystemExit(f"the answers differ at request {i}")
        ratio = median([new / old for old, new in zip(times["old"], times["new"], strict=True)])
        log(f"ab: old {median(times['old']):.3f} ms, new {median(times['new']):.3f} ms, new/old {ratio:.3f}")
        emit({"bench": "ab_query", "old": a.old, "db": "postgresql" if pg_url else "sqlite", "n": a.n,
              "query": a.query, "trial_ids": a.trial_ids, "old_p50_ms": median(times["old"]),
              "new_p50_ms": median(times["new"]), "ratio_new_old": ratio})


if __name__ == "__main__":
    main()
