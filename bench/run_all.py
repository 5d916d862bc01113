"""Run the whole benchmark suite and write bench/report.md (+ bench/plots/*.png).

    .venv/bin/python bench/run_all.py            # peers: mlflow, optuna (DET_BENCH_PEERS overrides)
    .venv/bin/python bench/run_all.py --only bm4_scheduler   # rerun one, merged into results.json
    DET_BENCH_PEERS=mlflow,optuna,ray .venv/bin/python bench/run_all.py

Creates the pinned peer venvs if missing, prints calib.py at start and end (noisy if they
differ by > 1.5x), runs each benchmark in its own process, keeps every JSON summary in
bench/results.json and writes the report table of figures vs targets. Each benchmark that
runs a master (those whose --help offers --db-url) runs on SQLite and then, right after, on
PostgreSQL when the server DET_BENCH_PG_DSN names can be reached (skipped with the reason
logged and reported otherwise, or with --sqlite-only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import (
    BENCH,
    PEER_PINS,
    PEER_VENVS,
    PG_ADMIN_DSN,
    libpq_url,
    log,
    peer_selected,
    run_json,
)

BENCHES = ["bm1_ingest.py", "bm2_launch.py", "bm3_searcher.py", "bm4_scheduler.py", "bm5_query.py",
           "bm6_proxy.py", "bm7_footprint.py", "bm8_dashboard.py", "bm9_container.py",
           "bm10_hub.py", "bm11_k8s.py"]

# (key, label, bench, field, target, better)
TARGETS = [
    ("bm1_vs_mlflow", "BM-1 ingest / MLflow log_batch (x)", "bm1_ingest", "ratio_vs_mlflow", 10, "higher"),
    ("bm1_vs_raw", "BM-1 ingest / raw reference (SQLite executemany; PG: COPY)", "bm1_ingest", "ratio_vs_raw",
     0.25, "higher"),
    ("bm1_report_p50", "BM-1 in-trial report() p50 (us)", "bm1_ingest", "report_p50_us", 20, "lower"),
    ("bm1_visible_p99", "BM-1 time to visibility p99 (ms)", "bm1_ingest", "visible_p99_ms", 1000, "lower"),
    ("bm3_mem", "BM-3 in-memory / Optuna SHA (x)", "bm3_searcher", "ratio_mem_vs_optuna", 2, "higher"),
    ("bm3_durable", "BM-3 durable / Optuna RDB (x)", "bm3_searcher", "ratio_durable_vs_optuna_rdb", 100, "higher"),
    ("bm3_scale", "BM-3 cost/decision last10% / first10%", "bm3_searcher", "cost_ratio_last_vs_first", 1.5, "lower"),
    ("bm3_gate", "BM-3 stop decisions differing from the 0.38.1 rule", "bm3_searcher", "gate_mismatches", 0, "lower"),
    ("bm2_tps", "BM-2 trials/s (100-trial ASHA, 2 slots)", "bm2_launch", "trials_per_s", 6, "higher"),
    ("bm2_tps_reuse", "BM-2 trials/s vs Ray reuse_actors=True figure", "bm2_launch", "trials_per_s", 15, "higher"),
    ("bm2_vs_ray", "BM-2 trials/s / Ray Tune default, same run (x)", "bm2_launch", "ratio_vs_ray_default", 10, "higher"),
    ("bm2_vs_ray_reuse", "BM-2 trials/s / Ray Tune reuse_actors=True, same run (x)", "bm2_launch",
     "ratio_vs_ray_reuse", 1, "higher"),
    ("bm2_floor", "BM-2 wall / launch floor (x)", "bm2_launch", "wall_over_floor", 1.5, "lower"),
    ("bm2_p50", "BM-2 allocation -> first report p50 (ms)", "bm2_launch", "alloc_to_first_report_p50_ms", 150, "lower"),
    ("bm2_p95", "BM-2 allocation -> first report p95 (ms)", "bm2_launch", "alloc_to_first_report_p95_ms", 300, "lower"),
    ("bm4_rate", "BM-4 persisted placements/s (5k one-slot trials, 50 slots)", "bm4_scheduler",
     "placements_per_s", 500, "higher"),
    ("bm4_vs_ref_b", "BM-4 placements/s / SQLite 100 UPDATEs per FULL commit (x)", "bm4_scheduler",
     "ratio_vs_ref_b", 0.5, "higher"),
    ("bm4_pass_p99", "BM-4 scheduling pass p99 at ~5k pending, placements written (ms)", "bm4_scheduler",
     "pass_p99_ms", 50, "lower"),
    ("bm4_decision_p99", "BM-4 scheduling decision p99 at ~5k pending: queue read + policy (ms)",
     "bm4_scheduler", "decision_p99_ms", 50, "lower"),
    ("bm4_q2a_p99", "BM-4 queue -> allocated p99, 5k queued at once (ms)", "bm4_scheduler",
     "queue_to_alloc_p99_ms", 1000, "lower"),
    ("bm4_fair_placements", "BM-4 fair-share deviation: each job's share of placements while all waited",
     "bm4_scheduler", "placement_share_dev", 0.1, "lower"),
    ("bm4_fair", "BM-4 fair-share deviation, max over instantaneous job-queue samples", "bm4_scheduler",
     "fair_share_dev_max", 0.1, "lower"),
    ("bm5_q1", "BM-5 Q1 p50 via REST (ms)", "bm5_query", "q1_ms", 5, "lower"),
    ("bm5_q1_raw", "BM-5 Q1 REST / raw SQL (x)", "bm5_query", "q1_vs_raw_x", 3, "lower"),
    ("bm5_q1_mlflow", "BM-5 Q1 speed-up vs MLflow (x)", "bm5_query", "ratio_q1_vs_mlflow", 5, "higher"),
    ("bm5_q2", "BM-5 Q2 p50, 200 trials downsampled (ms)", "bm5_query", "q2_ms", 100, "lower"),
    ("bm5_q3", "BM-5 Q3 p50, 200 trials (ms)", "bm5_query", "q3_ms", 30, "lower"),
    ("bm5_q3_flat", "BM-5 Q3 growth at 10x points (x)", "bm5_query", "q3_growth_10x", 1.2, "lower"),
    ("bm6_added_p50", "BM-6 proxy added p50 latency over direct, 100 B GET (ms)", "bm6_proxy", "added_p50_ms",
     1.0, "lower"),
    ("bm6_c10_jsp", "BM-6 c=10 rps / jupyter-server-proxy (x)", "bm6_proxy", "ratio_c10_vs_jsp", 3, "higher"),
    ("bm6_c10_direct", "BM-6 c=10 rps / direct", "bm6_proxy", "ratio_c10_vs_direct", 0.25, "higher"),
    ("bm6_big_jsp", "BM-6 1 MiB GET MB/s / jupyter-server-proxy (x)", "bm6_proxy", "ratio_big_vs_jsp", 2,
     "higher"),
    ("bm6_ws_jsp", "BM-6 WS RTT p50: jupyter-server-proxy / ours (x)", "bm6_proxy", "ratio_ws_rtt_jsp_over_ours",
     1, "higher"),
    ("bm6_cull_tick", "BM-6 idle-cull pass over 500 sessions: running-task read + sweep, p50 (ms)", "bm6_proxy",
     "cull_tick_p50_ms", 10, "lower"),
    ("bm6_cull_late", "BM-6 idle cull: latest cull past the timeout (s; one pass = 1 s)", "bm6_proxy",
     "cull_past_timeout_s", 1, "lower"),
    ("bm6_route_add", "BM-6 route add: readiness answer -> first proxied body (ms)", "bm6_proxy", "route_add_ms",
     2, "lower"),
    ("bm6_route_remove", "BM-6 route remove: kill request sent -> proxy refuses (ms)", "bm6_proxy",
     "route_remove_ms", 2, "lower"),
    ("bm7_import", "BM-7 harness import (ms)", "bm7_footprint", "import_ms", 100, "lower"),
    ("bm7_import_floor", "BM-7 import / stdlib floor (x)", "bm7_footprint", "import_over_stdlib_x", 1.2, "lower"),
    ("bm7_mlflow", "BM-7 import speed-up vs mlflow (x)", "bm7_footprint", "ratio_vs_mlflow", 14, "higher"),
    ("bm7_optuna", "BM-7 import speed-up vs optuna (x)", "bm7_footprint", "ratio_vs_optuna", 2.9, "higher"),
    ("bm7_p50", "BM-7 report() p50, master down (us)", "bm7_footprint", "report_p50_us", 20, "lower"),
    ("bm7_p99", "BM-7 report() p99, master down (us)", "bm7_footprint", "report_p99_us", 200, "lower"),
    ("bm7_rss", "BM-7 RSS growth over 100k reports (MB)", "bm7_footprint", "rss_growth_mb", 15, "lower"),
    ("bm8_vs_optuna", "BM-8 experiment page, 200 trials: first chart / Optuna Dashboard's (x)", "bm8_dashboard",
     "ratio_vs_optuna", 0.5, "lower"),
    ("bm8_abs", "BM-8 experiment page, 200 trials x 1,000 steps: click -> first chart (ms)", "bm8_dashboard",
     "ours_ms", 2000, "lower"),
    ("bm8_floor", "BM-8 first chart / static-page floor, same points, same module (x)", "bm8_dashboard",
     "ratio_vs_floor", 1.5, "lower"),
    ("bm9_margin", "BM-9 container task, start -> first line: 1.2 x docker run + 150 ms - ours (ms; >= 0 meets)",
     "bm9_container", "margin_ms", 0, "higher"),
    ("bm10_ratio", "BM-10 hub spawn -> ready: DetSpawner / LocalProcessSpawner, same run (x)", "bm10_hub",
     "ratio_vs_local", 1.3, "lower"),
    ("bm10_conc", "BM-10 20 users spawning at once: DetSpawner servers not ready", "bm10_hub",
     "det_conc_not_ready", 0, "lower"),
    ("bm11_ratio", "BM-11 Kubernetes placements/s (submit -> all pods running): ours / Jobs made directly, "
     "same run (x)", "bm11_k8s", "ratio_vs_direct", 0.8, "higher"),
]


BACKENDS = ("sqlite", "postgresql")


def ensure_venvs() -> None:
    for name, venv in PEER_VENVS.items():
        if not peer_selected(name) or (venv / "bin" / "python").exists():
            continue
        log(f"creating {venv} with {PEER_PINS[name]}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PEER_PINS[name]], check=True)


def server(dsn: str) -> str:
    """The DSN without its user (and password), for logs and the committed report."""
    return dsn.rsplit("@", 1)[-1]


def pg_skip_reason(dsn: str) -> str | None:
    """Why the PostgreSQL runs cannot happen (None: they can): the admin connection must open."""
    try:
        import psycopg

        psycopg.connect(libpq_url(dsn), connect_timeout=5).close()
    except Exception as exc:  # any failure to connect means: run SQLite only, and say why
        return f"cannot connect to {server(dsn)} (DET_BENCH_PG_DSN): {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


def supports_db_url(script: str) -> bool:
    """Whether a benchmark takes --db-url, asked of the script itself so one that gains the
    option later runs on PostgreSQL with no change here."""
    proc = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True,
                          text=True, timeout=120)
    return proc.returncode == 0 and "--db-url" in proc.stdout


def fmt(v: object) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def judge(v: object, target: float, better: str) -> str:
    if isinstance(v, bool) or v is None:
        return "not run" if v is None else str(v)
    return "MET" if (v >= target if better == "higher" else v <= target) else "missed"


def write_report(results: dict[str, dict], calib0: float, calib1: float, wall: float,
                 pg_skipped: str | None, reruns: list[dict] | None = None) -> None:
    """results: backend -> bench -> summary. One row per figure, one column per backend;
    a figure of a benchmark that does not run on PostgreSQL reads "n/a" there."""
    noisy = max(calib0, calib1) / min(calib0, calib1) > 1.5
    figures, lines = [], []
    for key, label, bench, field, target, better in TARGETS:
        cells, plots = [], []
        for db, suffix, tag in (("sqlite", "", ""), ("postgresql", "_pg", " [PostgreSQL]")):
            summary = results.get(db, {}).get(bench)
            v = summary.get(field) if summary else None
            if summary is None and db == "postgresql" and not pg_skipped:
                cells += ["n/a", "n/a"]
                continue
            cells += [fmt(v), judge(v, target, better)]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                figures.append({"key": key + suffix, "label": label + tag, "value": v, "target": target,
                                "better": better})
                plots.append(f"![](plots/{key}{suffix}.png)")
        cmp = ">=" if better == "higher" else "<="
        lines.append(f"| {label} | {cmp} {target} | {' | '.join(cells)} | {' '.join(plots)} |")
    peers = sorted({p for by_bench in results.values() for r in by_bench.values() for p in r.get("peers", [])})
    ran = [db for db in BACKENDS if results.get(db)]
    pg_benches = ", ".join(sorted(results.get("postgresql", {}))) or "none"
    (BENCH / "figures.json").write_text(json.dumps(figures))
    mpl = PEER_VENVS["mlflow"] / "bin" / "python"
    if mpl.exists():
        subprocess.run([str(mpl), str(BENCH / "_plot.py"), str(BENCH / "figures.json"), str(BENCH / "plots")],
                       check=False)
    text = [
        "# Benchmark report", "",
        f"Generated by `bench/run_all.py` on {time.strftime('%Y-%m-%d %H:%M')} in {wall:.0f} s. "
        "Ratios are medians of per-pair ratios over interleaved repetitions (see each benchmark's "
        "`runs` in results.json); absolute numbers are for information only.", "",
        f"- calib (raw sqlite executemany, rows/s): start {calib0:,.0f}, end {calib1:,.0f} -> "
        f"{'**NOISY** (re-run)' if noisy else 'not noisy'}",
        f"- peers run: {', '.join(peers) or 'none'}; Ray Tune: "
        + ("ran in the same job as BM-2 (40 trials per repetition, default and reuse_actors=True)."
           if "ray" in peers else "skipped (set DET_BENCH_PEERS=mlflow,optuna,ray to run it; 628 MB "
           "install); the 'vs Ray reuse_actors=True figure' row then compares with the published 15/s."),
        f"- databases run: {', '.join(ran)}; "
        + (f"PostgreSQL skipped: {pg_skipped}." if pg_skipped else
           f"on PostgreSQL (a fresh database per run on {server(PG_ADMIN_DSN)}): {pg_benches}; "
           "the others do not run a master on a database (n/a). BM-1's raw reference on "
           "PostgreSQL is a binary COPY into an indexed row-per-value table on the same server "
           "(`raw_reference` in results.json; the SQLite executemany ratio is `ratio_vs_raw_sqlite`)."),
        *(["- rerun after the full run (`--only`): "
           + ", ".join(f"{r['bench']} at {r['at']} UTC" + (
               f" (calib {r['calib_rows_per_s'][0]:,.0f} -> {r['calib_rows_per_s'][1]:,.0f})"
               if r.get("calib_rows_per_s") else "") for r in reruns)
           + "; their rows come from that rerun, the others from the full run."] if reruns else []),
        "",
        "| figure | target | SQLite | status | PostgreSQL | status | plot |",
        "|---|---|---|---|---|---|---|", *lines, "",
    ]
    (BENCH / "report.md").write_text("\n".join(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, no peers, no report")
    ap.add_argument("--sqlite-only", action="store_true", help="skip the PostgreSQL runs")
    ap.add_argument("--only", action="append", default=[], metavar="BENCH",
                    help="run only this benchmark (e.g. bm4_scheduler; repeatable) and merge its "
                    "results into results.json, which records the rerun")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite report.md and the plots from results.json, running nothing")
    a = ap.parse_args()
    if a.report_only:
        saved = json.loads((BENCH / "results.json").read_text())
        pg = saved.pop("postgresql", {})
        c0, c1, skipped = saved.pop("calib_start"), saved.pop("calib_end"), saved.pop("pg_skipped", None)
        wall = saved.pop("wall_s", 0.0)
        reruns = saved.pop("reruns", [])
        write_report({"sqlite": saved, "postgresql": pg}, c0["rows_per_s"], c1["rows_per_s"], wall, skipped,
                     reruns)
        return
    if a.only:
        _rerun(a.only)
        return
    extra = ["--smoke"] if a.smoke else []
    if not a.smoke:
        ensure_venvs()
    pg_skipped = "--sqlite-only" if a.sqlite_only else pg_skip_reason(PG_ADMIN_DSN)
    if pg_skipped:
        log(f"PostgreSQL runs skipped: {pg_skipped}")
    t0 = time.time()
    calib0 = run_json([sys.executable, str(BENCH / "calib.py"), *extra], timeout=120)
    print(json.dumps(calib0), flush=True)
    results: dict[str, dict] = {db: {} for db in BACKENDS}
    for b in BENCHES:
        runs = [("sqlite", [])]
        if not pg_skipped and supports_db_url(b):
            runs.append(("postgresql", ["--db-url", PG_ADMIN_DSN]))
        for db, db_args in runs:
            log(f"== {b}" + (f" on {db}" if len(runs) > 1 else ""))
            r = run_json([sys.executable, str(BENCH / b), *extra, *db_args], timeout=1800)
            results[db][b.removesuffix(".py")] = r
            print(json.dumps({k: v for k, v in r.items() if k not in ("runs", "rounds")}), flush=True)
    calib1 = run_json([sys.executable, str(BENCH / "calib.py"), *extra], timeout=120)
    print(json.dumps(calib1), flush=True)
    if not a.smoke:
        (BENCH / "results.json").write_text(json.dumps(
            {"calib_start": calib0, "calib_end": calib1, "pg_skipped": pg_skipped, "wall_s": time.time() - t0,
             **results["sqlite"],
             "postgresql": results["postgresql"]}, indent=1))
        write_report(results, calib0["rows_per_s"], calib1["rows_per_s"], time.time() - t0, pg_skipped)


def _rerun(names: list[str]) -> None:
    """Run some benchmarks again (both databases, peers as configured) and merge them into the
    saved results; the report then says which figures come from the rerun, and when."""
    ensure_venvs()
    saved = json.loads((BENCH / "results.json").read_text())
    pg_skipped = saved.get("pg_skipped")
    calib0 = run_json([sys.executable, str(BENCH / "calib.py")], timeout=120)
    print(json.dumps(calib0), flush=True)
    done = []
    for name in names:
        b = name.removesuffix(".py") + ".py"
        if b not in BENCHES:
            raise SystemExit(f"--only {name}: not a benchmark; choose from {', '.join(BENCHES)}")
        runs = [("sqlite", [])]
        if not pg_skipped and supports_db_url(b):
            runs.append(("postgresql", ["--db-url", PG_ADMIN_DSN]))
        for db, db_args in runs:
            log(f"== {b} on {db} (rerun)")
            r = run_json([sys.executable, str(BENCH / b), *db_args], timeout=1800)
            print(json.dumps({k: v for k, v in r.items() if k not in ("runs", "rounds")}), flush=True)
            target = saved if db == "sqlite" else saved.setdefault("postgresql", {})
            target[b.removesuffix(".py")] = r
        done.append({"bench": b.removesuffix(".py"), "at": time.strftime("%Y-%m-%d %H:%M", time.gmtime())})
    # The machine's speed around the rerun, as the full run records it around itself.
    calib1 = run_json([sys.executable, str(BENCH / "calib.py")], timeout=120)
    print(json.dumps(calib1), flush=True)
    for entry in done:
        entry["calib_rows_per_s"] = [calib0["rows_per_s"], calib1["rows_per_s"]]
    saved.setdefault("reruns", []).extend(done)
    (BENCH / "results.json").write_text(json.dumps(saved, indent=1))
    pg = saved.pop("postgresql", {})
    c0, c1 = saved.pop("calib_start"), saved.pop("calib_end")
    saved.pop("pg_skipped", None)
    wall, reruns = saved.pop("wall_s", 0.0), saved.pop("reruns", [])
    write_report({"sqlite": saved, "postgresql": pg}, c0["rows_per_s"], c1["rows_per_s"], wall, pg_skipped,
                 reruns)


if __name__ == "__main__":
    main()
