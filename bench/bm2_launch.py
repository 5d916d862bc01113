"""BM-2: trial launch and ASHA experiment throughput, det-jupyter vs Ray Tune 2.60.

det-jupyter: a real master (`det-jupyter up`, SQLite WAL or, with `--db-url`, a fresh
PostgreSQL database; its own local agent with 2 slots).
One adaptive_asha experiment (time_metric batches, max_time 10, divisor 3, aggressive,
max_trials 100, max_concurrent_trials 2) of a no-op trial (`_bm2_trial.py`: imports only the
harness, reports 10 validation steps, checks should_preempt() after each, returns when asked).

Measured, per repetition:
- wall: from just before POST /api/v1/experiments (this process's clock) to the latest
  endTime among the experiment and its trials (the master's clock; same host). Polling only
  detects the end, it does not quantize it.
- trials/s = trials / wall.
- ASHA early stops, two ways: allocations the master asked to stop (`preempt_requested` in
  the master's database, read directly after the run) and trials that actually exited before step 10
  (the trial's own exit line). A no-op trial reports its 10 steps in milliseconds, so it
  usually finishes before a stop decision reaches it.
- allocation -> first report: from the allocation's `start_time` (set when the master places
  it on the agent's slots; read from the master's database as REST exposes no allocation
  times) to the first validation report's `endTime` from GET /api/v1/trials/{id}/workloads
  (the harness stamps it with time.time() when report_validation_metrics() is called).
  p50/p95 nearest-rank over all trials. The trial's own `BM2 {...}` log line (GET
  /api/v1/trials/{id}/logs) splits this into spawn (placement -> first user statement:
  spec build, websocket, task dir, context download, `unshare`, `sh`, interpreter start),
  harness import (`det_harness` only), core.init() (lazy `det_harness.core` imports plus the
  POST /api/v1/runs/start round trip), init -> first report, first report -> exit (the
  remaining 9 reports and the shipper's close), and exit -> the master's allocation end.
- launch floor = trials x median(`python -c "import det_harness"`) / 2 slots, measured in the
  same job right before each repetition; wall / floor.

Peer (only when DET_BENCH_PEERS names `ray`; in bench/.venv-ray, ray[tune]==2.60.0): 40 trials
of a function trainable reporting 10 steps, ASHAScheduler(max_t=10, grace_period=1,
reduction_factor=3), num_cpus=2, reuse_actors False and True, interleaved with ours per
repetition; ratios are medians of per-pair ratios. This file is also the peer's driver
(`--ray-peer`, run by the peer venv's python; it imports nothing of det-jupyter then).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SLOTS = 2
TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"}


def parse_ts(value: str | None) -> float | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def experiment_config(trials: int) -> dict[str, Any]:
    return {
        "name": "bm2", "entrypoint": "python3 trial.py", "max_restarts": 0,
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {"name": "adaptive_asha", "metric": "loss", "smaller_is_better": True,
                     "time_metric": "batches", "max_time": 10, "divisor": 3, "mode": "aggressive",
                     "max_trials": trials, "max_concurrent_trials": SLOTS},
        "resources": {"slots_per_trial": 1},
    }


ALLOCATIONS_SQL = ("SELECT trial_id, submitted_at, start_time, end_time, preempt_requested, exit_code "
                   "FROM allocations WHERE trial_id IS NOT NULL ORDER BY submitted_at")


def allocation_rows(master: Any) -> list[dict[str, Any]]:
    """The allocations table straight from the master's database."""
    from _common import master_rows

    return master_rows(master, ALLOCATIONS_SQL)


def allocations(master: Any) -> dict[int, dict[str, Any]]:
    """trial id -> its (first) allocation row."""
    out: dict[int, dict[str, Any]] = {}
    for r in allocation_rows(master):
        out.setdefault(r["trial_id"], r)
    return out


def trial_stamps(client: Any, trial_id: int) -> dict[str, Any] | None:
    """The trial's own `BM2 {...}` line from its logs, or None if it never printed one."""
    items = client.get(f"/api/v1/trials/{trial_id}/logs")
    for item in [items] if isinstance(items, dict) else items:  # one NDJSON line parses as a dict
        msg = (item.get("result") or item).get("log") or ""
        if msg.startswith("BM2 "):
            return json.loads(msg[4:])
    return None


def first_report_time(client: Any, trial_id: int) -> float | None:
    wl = client.get(f"/api/v1/trials/{trial_id}/workloads?limit=1")["workloads"]
    for w in wl:
        for kind in ("validation", "training"):
            if kind in w:
                return parse_ts(w[kind]["endTime"])
    return None


def run_ours(master: Any, client: Any, work: Path, trials: int, timeout: float) -> dict[str, Any]:
    import yaml
    from _common import BENCH, median, percentile

    from tests._master import create_experiment

    ctx = work / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "trial.py").write_text((BENCH / "_bm2_trial.py").read_text())
    t_create = time.time()
    exp_id = create_experiment(client, yaml.safe_dump(experiment_config(trials)), ctx)["experiment"]["id"]
    deadline = t_create + timeout
    state = ""
    while time.time() < deadline:
        state = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
        if state in TERMINAL:
            break
        time.sleep(0.25)  # each poll costs the master ~5 ms; wall comes from endTime anyway
    t_seen = time.time()
    exp = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    rows = client.get(f"/api/v1/experiments/{exp_id}/trials?limit=100000")["trials"]
    done = state in TERMINAL and all(t["state"] in TERMINAL for t in rows)
    ends = [parse_ts(exp.get("endTime"))] + [parse_ts(t.get("endTime")) for t in rows]
    wall = max(e for e in ends if e is not None) - t_create if done else t_seen - t_create
    allocs = allocations(master)
    lat, parts, early_exit, completed = [], {k: [] for k in ("spawn", "import", "init", "first", "run", "exit")}, 0, 0
    for t in rows:
        a, first = allocs.get(t["id"]), first_report_time(client, t["id"])
        s = trial_stamps(client, t["id"])
        completed += t["state"] == "STATE_COMPLETED"
        if a is None or a["start_time"] is None:
            continue
        if first is not None:
            lat.append(first - a["start_time"])
        if s is None:
            continue
        early_exit += s["steps"] < 10
        if "t_first" in s:
            parts["spawn"].append(s["t0"] - a["start_time"])
            parts["import"].append(s["t_import"] - s["t0"])
            parts["init"].append(s["t_init"] - s["t_import"])
            parts["first"].append(s["t_first"] - s["t_init"])
            parts["run"].append(s["t_exit"] - s["t_first"])
        if a["end_time"] is not None:
            parts["exit"].append(a["end_time"] - s["t_exit"])
    busy = sum(a["end_time"] - a["start_time"] for a in allocs.values()
               if a["start_time"] is not None and a["end_time"] is not None)
    n = len(rows)
    return {
        "experiment_id": exp_id, "state": state, "complete": done, "trials": n,
        "trials_completed": completed, "wall_s": wall, "trials_per_s": n / wall if done and wall > 0 else None,
        "stop_requested": sum(bool(a["preempt_requested"]) for a in allocs.values()),
        "stopped_early": early_exit,
        "alloc_to_first_report_p50_ms": percentile(lat, 50) * 1e3 if lat else None,
        "alloc_to_first_report_p95_ms": percentile(lat, 95) * 1e3 if lat else None,
        "first_alloc_after_create_ms": (min(a["start_time"] for a in allocs.values() if a["start_time"])
                                        - t_create) * 1e3 if allocs else None,
        "slot_utilisation": busy / (SLOTS * wall) if wall > 0 else None,
        "breakdown_p50_ms": {k: (median(v) or 0.0) * 1e3 for k, v in parts.items()},
        "breakdown_p95_ms": {k: percentile(v, 95) * 1e3 if v else None for k, v in parts.items()},
    }


def launch_floor(trials: int, n: int) -> dict[str, Any]:
    from _common import median, time_import

    imp = time_import(sys.executable, "import det_harness", n)
    bare = time_import(sys.executable, "pass", max(3, n // 3))
    return {"import_ms": median(imp) * 1e3, "pass_ms": median(bare) * 1e3,
            "floor_s": trials * median(imp) / SLOTS}


def run_ray_peer(trials: int, reuse: bool) -> dict[str, Any]:
    """Runs inside bench/.venv-ray: Ray Tune ASHA over a trivial function trainable."""
    t_start = time.time()
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    def trainable(config: dict[str, Any]) -> None:
        for step in range(1, 11):
            tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / step, "batches": step})

    ray.init(num_cpus=SLOTS, include_dashboard=False, log_to_driver=False)
    t_init = time.time()
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.uniform(0.0, 1.0)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=trials, reuse_actors=reuse,
            scheduler=ASHAScheduler(time_attr="batches", max_t=10, grace_period=1, reduction_factor=3)),
        run_config=tune.RunConfig(verbose=0, storage_path=tempfile.mkdtemp(prefix="bm2-ray-")),
    )
    t0 = time.time()
    results = tuner.fit()
    wall = time.time() - t0
    stopped = sum(1 for r in results if (r.metrics or {}).get("batches", 10) < 10)
    ray.shutdown()
    return {"trials": trials, "reuse_actors": reuse, "wall_s": wall, "trials_per_s": trials / wall,
            "stopped_early": stopped, "init_s": t_init - t_start}


def main() -> None:
    from _common import add_db_arg  # stdlib only: the Ray peer driver may import it too

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--ray-trials", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--floor-n", type=int, default=15, help="import timings per floor measurement")
    ap.add_argument("--ray-peer", choices=["default", "reuse"], help=argparse.SUPPRESS)
    add_db_arg(ap)
    a = ap.parse_args()
    if a.ray_peer:
        print(json.dumps(run_ray_peer(a.ray_trials, a.ray_peer == "reuse")), flush=True)
        return
    run(a)


def run(a: argparse.Namespace) -> None:
    from _common import (
        backend,
        bench_database,
        emit,
        log,
        median,
        median_ratio,
        peer_python,
        peer_selected,
        run_json,
    )

    from tests._master import MasterProcess

    if a.smoke:
        a.trials, a.reps, a.floor_n = 10, 1, 5
    ray = not a.smoke and peer_selected("ray")
    skipped = None
    if a.smoke:
        skipped = "--smoke runs no peers"
    elif not ray:
        skipped = "DET_BENCH_PEERS does not name ray (Ray Tune runs only when asked)"
    elif peer_python("ray") is None:
        ray, skipped = False, "bench/.venv-ray is missing; run `DET_BENCH_PEERS=...,ray bench/run_all.py`"
    ours: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    peers: dict[str, list[dict[str, Any]]] = {"default": [], "reuse": []}
    with tempfile.TemporaryDirectory(prefix="bm2-") as d, bench_database(a.db_url) as db_url:
        master = MasterProcess(Path(d) / "master", slots=SLOTS, db_url=db_url).start()
        try:
            client = master.admin()
            for rep in range(a.reps):
                floors.append(launch_floor(a.trials, a.floor_n))
                ours.append(run_ours(master, client, Path(d) / f"rep{rep}", a.trials,
                                     timeout=60 if a.smoke else 600))
                for mode in ("default", "reuse") if ray else ():
                    py = str(peer_python("ray"))
                    peers[mode].append(run_json([py, __file__, "--ray-peer", mode, "--ray-trials",
                                                 str(a.ray_trials)], timeout=900))
                o = ours[-1]
                log(f"bm2 rep {rep}: {o['trials']} trials in {o['wall_s']:.2f}s "
                    f"({o['trials_per_s']} /s), floor {floors[-1]['floor_s']:.2f}s, "
                    f"alloc->first p50 {o['alloc_to_first_report_p50_ms']} ms; ray "
                    f"{[p[-1]['trials_per_s'] for p in peers.values() if p]}")
        finally:
            master.stop()
    tps = [o["trials_per_s"] or 0.0 for o in ours]
    over_floor = [o["wall_s"] / f["floor_s"] for o, f in zip(ours, floors, strict=True)]
    emit({
        "bench": "bm2_launch", "smoke": a.smoke, "db": backend(a.db_url), "peers": ["ray"] if ray else [],
        "ray_skipped": skipped, "trials": ours[0]["trials"], "reps": a.reps,
        "wall_s": median([o["wall_s"] for o in ours]), "trials_per_s": median(tps),
        "stop_requested": median([o["stop_requested"] for o in ours]),
        "stopped_early": median([o["stopped_early"] for o in ours]),
        "alloc_to_first_report_p50_ms": median([o["alloc_to_first_report_p50_ms"] or 0.0 for o in ours]),
        "alloc_to_first_report_p95_ms": max(o["alloc_to_first_report_p95_ms"] or 0.0 for o in ours),
        "import_ms": median([f["import_ms"] for f in floors]),
        "launch_floor_s": median([f["floor_s"] for f in floors]),
        "wall_over_floor": median(over_floor),
        "complete": all(o["complete"] for o in ours),
        "ray_default_trials_per_s": median([p["trials_per_s"] for p in peers["default"]]) if ray else None,
        "ray_reuse_trials_per_s": median([p["trials_per_s"] for p in peers["reuse"]]) if ray else None,
        "ratio_vs_ray_default": median_ratio(tps, [p["trials_per_s"] for p in peers["default"]]) if ray else None,
        "ratio_vs_ray_reuse": median_ratio(tps, [p["trials_per_s"] for p in peers["reuse"]]) if ray else None,
        "runs": {"ours": ours, "floor": floors, "ray": peers},
    })


if __name__ == "__main__":
    main()
