"""Each benchmark's --smoke run (tiny sizes, no peers) prints a JSON summary with its keys.

Keeps the bench scripts from rotting; the real suite is `bench/run_all.py`, not a test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
PG_DSN = os.environ.get("DET_TEST_PG_DSN")

CASES = [
    ("calib.py", {"bench", "rows_per_s"}, 30),
    ("bm1_ingest.py", {"points_per_s", "ratio_vs_raw", "report_p50_us", "visible_p99_ms", "complete"}, 90),
    ("bm2_launch.py", {"trials_per_s", "wall_over_floor", "alloc_to_first_report_p50_ms", "ray_skipped", "complete"}, 60),
    ("bm3_searcher.py", {"mem_reports_per_s", "durable_reports_per_s", "gate_mismatches", "cost_ratio_last_vs_first"}, 60),
    ("bm5_query.py", {"q1_ms", "q3_ms", "q3_growth_10x", "q4_fresh", "q1_raw_ms"}, 90),
    ("bm6_proxy.py", {"added_p50_ms", "ours_seq_p50_ms", "ours_c10_rps", "ours_big_mb_s",
                      "ours_ws_rtt_p50_ms", "direct_seq_p50_ms", "ratio_c10_vs_direct",
                      "cull_tick_p50_ms", "cull_sweep_p50_ms", "cull_past_timeout_s"}, 120),
    ("bm7_footprint.py", {"import_ms", "stdlib_floor_ms", "report_p50_us", "report_p99_us", "rss_growth_mb"}, 60),
    ("bm8_dashboard.py", {"ours_ms", "ours_loss_ms", "floor_ms", "floor_loss_ms", "table_ms", "ratio_vs_floor",
                          "optuna_dashboard_ms", "ratio_vs_optuna", "meets_2s", "meets_vs_floor", "rounds"}, 180),
    ("bm9_container.py", {"ours_ms", "docker_run_ms", "process_ms", "margin_ms", "meets_target", "rounds"}, 120),
    ("bm10_hub.py", {"det_ready_ms", "local_ready_ms", "det_proxied_ms", "local_proxied_ms", "ratio_vs_local",
                     "margin_ms", "meets_target", "det_conc_p95_ms", "det_conc_not_ready", "conc_all_ready",
                     "rounds"}, 240),
    ("bm11_k8s.py", {"ours_placements_per_s", "direct_placements_per_s", "ratio_vs_direct", "ours_jobs_per_s",
                     "direct_jobs_per_s", "ours_create_to_running_p50_s", "ours_create_to_running_p95_s",
                     "direct_create_to_running_p50_s", "direct_create_to_running_p95_s", "ours_visible_per_s",
                     "ours_create_to_visible_p50_ms", "meets_target", "complete", "trials", "rounds"}, 240),
]


@pytest.mark.parametrize(("script", "keys", "limit"), CASES, ids=[c[0] for c in CASES])
def test_smoke(script: str, keys: set[str], limit: int) -> None:
    proc = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True,
                          text=True, timeout=limit, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    if summary.get("skipped"):  # bm9: no Docker engine; bm10: no jupyterhub or configurable-http-proxy;
        # bm11: no root, no kubernetes client (tests/_k8s.py's why_no_cluster) or no test bed up
        pytest.skip(summary["skipped"])
    assert keys <= summary.keys(), f"missing {keys - summary.keys()}"
    assert summary.get("smoke", True) is True
    assert not summary.get("peers"), "smoke runs must not run peers"
    if script == "bm6_proxy.py":
        # The culler's decisions (fake time, real store and HTTP): every quiet session culled
        # within a pass of its timeout, no active one.
        assert summary["cull_within_timeout_plus_tick"] is True, summary
        assert summary["cull_active_culled"] == 0 and summary["cull_quiet_not_culled"] == 0, summary
    if script == "bm10_hub.py":
        # Every user spawning at once got a ready server, on both hubs.
        assert summary["conc_all_ready"] is True, summary
    if script == "bm11_k8s.py":
        # Every trial's pod and every Job's pod ran, on both sides.
        assert summary["complete"] is True and summary["trials"] >= 1, summary


@pytest.mark.parametrize("script", ["bm1_ingest.py", "bm2_launch.py", "bm3_searcher.py", "bm4_scheduler.py",
                                    "bm5_query.py"])
def test_smoke_on_postgres(script: str) -> None:
    """The benchmarks that run a master also run on PostgreSQL, in a database of their own that
    they drop afterwards."""
    if not PG_DSN:
        pytest.skip("PostgreSQL smoke runs need DET_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    import psycopg

    proc = subprocess.run([sys.executable, str(BENCH / script), "--smoke", "--db-url", PG_DSN],
                          capture_output=True, text=True, timeout=90, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["db"] == "postgresql" and summary.get("complete", True) is not False
    # The run's own database, by the name it logs (other runs on the same server, a benchmark
    # beside CI, may hold bench_* databases of their own meanwhile).
    made = re.findall(r"PostgreSQL database (bench_[0-9a-f]+) for this run", proc.stderr)
    assert made, proc.stderr[-3000:]
    with psycopg.connect(PG_DSN) as conn:
        left = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", (made,))]
    assert not left, f"the run's database was not dropped: {left}"


def test_bm3_gate_agrees_in_smoke() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "bm3_searcher.py"), "--smoke"],
                          capture_output=True, text=True, timeout=60, cwd=BENCH.parent)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["gate_reports"] > 0 and summary["gate_mismatches"] == 0


def test_bm4_smoke_places_every_trial() -> None:
    """BM-4 at small counts (2 experiments x 20 trials, 2 fake agents x 2 slots): every trial
    is placed once on a real slot, and every figure of the summary is there."""
    proc = subprocess.run([sys.executable, str(BENCH / "bm4_scheduler.py"), "--smoke"],
                          capture_output=True, text=True, timeout=90, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    keys = {"placements_per_s", "ratio_vs_ref_b", "ref_a_updates_per_s", "ref_b_updates_per_s",
            "queue_to_alloc_p99_ms", "pass_p99_ms", "pass_stats", "fair_share_dev_max",
            "placement_share_dev", "scheduler_type", "master_cpu_ms_per_placement"}
    assert keys <= summary.keys(), f"missing {keys - summary.keys()}"
    assert summary["smoke"] is True and not summary["peers"]
    run = summary["runs"][0]
    assert summary["complete"] is True and run["placements"] == 40
    assert run["agents"]["starts"] == 40 and run["agents"]["bad_slot_ids"] == 0
    assert sum(run["agents"]["per_agent"].values()) == 40
    for key in ("placements_per_s", "ref_b_updates_per_s", "queue_to_alloc_p99_ms", "placement_share_dev"):
        assert isinstance(summary[key], float), (key, summary[key])
    assert isinstance(summary["scheduler_type"], str)
    assert summary["pass_stats"] == "ok" or summary["pass_stats"].startswith("not available")


def test_ab_query_compares_a_revision_with_the_working_tree() -> None:
    """bench/ab_query.py at tiny sizes, HEAD against the working tree: both masters answer the
    same, each side is timed, and its temporary worktree is gone afterwards."""
    repo = BENCH.parent
    if subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("bench/ab_query.py compares git revisions: this checkout is not a git repository")
    proc = subprocess.run([sys.executable, str(BENCH / "ab_query.py"), "--old", "HEAD", "--trials", "3",
                           "--steps", "20", "--n", "20"], capture_output=True, text=True, timeout=120, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["db"] == "sqlite" and summary["n"] == 20
    assert summary["old_p50_ms"] > 0 and summary["new_p50_ms"] > 0 and summary["ratio_new_old"] > 0
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert "ab-" not in worktrees, worktrees
