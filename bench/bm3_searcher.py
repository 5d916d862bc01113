"""BM-3: searcher (stopping-based ASHA) decision throughput vs Optuna's SuccessiveHalvingPruner.

Driver: trials are created by the searcher; live trials report one validation per step in
round-robin (metrics {"loss", "batches"}); a Stop closes the trial. Trial k (creation order)
follows `_curves.curve(k)`, the same curve Optuna's trial number k gets.

Modes: in-memory (the pure `det_jupyter.searcher`), durable (the same, through the master's
`SearcherLog` on a real det-jupyter database, SQLite WAL, committed as the master commits), and
a no-op searcher (the driver's own cost). Durable mode models the master's group commit
(`services/_searcher_batch.py`): one round of the round-robin (the next report of every live
trial, at most `max_concurrent_trials`) is one *event group*, as if those trials' reports had
reached the master in one event-loop turn: their validations are fed in order in ONE
transaction that appends them to the searcher event log (with a snapshot every
`SNAPSHOT_EVERY` events), as `ExperimentService.searcher_events` does. A trial that ends in a
round exits one turn later: its trial_closed leads the next round's group (the master's exit
path queues it on the same batcher), with the trial_created of each trial the close lets the
searcher create (the master commits a Create with its trial_created). The validations keep
their order, so the decisions are those of the one-event-at-a-time run.
Correctness gate: every validation is also fed to `RefRule`, an independent re-implementation
of determined-0.38.md §5 step 7; the stop decisions must be identical (checked in-memory over
all trials, and in every durable run).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator

import sqlalchemy as sa
from _common import (
    add_db_arg,
    backend,
    bench_database,
    emit,
    log,
    median_ratio,
    peer_selected,
    run_peer,
)
from _curves import curve

from det_jupyter import searcher as search
from det_jupyter.services.experiments.searcher_log import SearcherEvent, SearcherLog
from det_jupyter.store import make_engine, migrate, sqlite_url
from det_jupyter.store import tables as t

HPARAMS = {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}}


class RefRule:
    """§5.7 of determined-0.38.md, written from the text alone (one bracket)."""

    def __init__(self, units: list[int], divisor: float) -> None:
        self.units, self.divisor = units, divisor
        self.rungs: list[list[float]] = [[] for _ in units]
        self.rung_of: dict[int, int] = {}

    def decide(self, trial: int, step: int, metric: float) -> bool:
        r = self.rung_of.get(trial, 0)
        while r < len(self.units) and self.units[r] <= step:
            rung = self.rungs[r]
            idx = bisect.bisect_left(rung, metric)
            rung.insert(idx, metric)
            self.rung_of[trial] = r
            if r == len(self.units) - 1:
                return True
            if idx >= max(int(len(rung) / self.divisor), 1):
                return True
            r += 1
            self.rung_of[trial] = r
        return False


def searcher_config(trials: int, steps: int) -> dict:
    return {"name": "adaptive_asha", "metric": "loss", "smaller_is_better": True,
            "time_metric": "batches", "max_time": steps, "max_trials": trials, "divisor": 4,
            "mode": "aggressive", "max_rungs": 5, "max_concurrent_trials": 16}


class Durable:
    """The master's own durability path: `SearcherLog` on a migrated det-jupyter database
    (SQLite WAL). Events fed inside `group()` share its transaction, the snapshot saved once at
    its end, as `ExperimentService.searcher_events` does; an event fed outside one is a group
    of its own."""

    def __init__(self, url: str, s: search.Searcher, cfg: dict) -> None:
        self.engine = make_engine(url)
        migrate(self.engine)
        with self.engine.begin() as conn:
            user = conn.execute(sa.insert(t.users).values(
                username="bench", password_hash="x", admin=True, active=True, created_at=0.0,
                modified_at=0.0).returning(t.users.c.id)).scalar_one()
            conn.execute(sa.insert(t.workspaces).values(id=1, name="w", immutable=False, archived=False,
                                                        user_id=user))
            conn.execute(sa.insert(t.projects).values(id=1, workspace_id=1, name="p", description="",
                                                      immutable=False, archived=False, user_id=user))
            self.exp_id = conn.execute(sa.insert(t.experiments).values(
                state="ACTIVE", name="bm3", labels=[], owner_id=user, project_id=1, job_id="bm3",
                config={"searcher": cfg, "hyperparameters": HPARAMS, "reproducibility": {"experiment_seed": 1}},
                original_config="", searcher_type="adaptive_asha", start_time=0.0,
            ).returning(t.experiments.c.id)).scalar_one()
        self.log = SearcherLog()
        self.log.put(self.exp_id, s)
        self.conn: sa.Connection | None = None

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for the events fed inside it."""
        with self.engine.begin() as conn:
            self.conn = conn
            try:
                yield
                self.log.save(conn, self.exp_id)
            finally:
                self.conn = None

    def call(self, event: SearcherEvent) -> list:
        """Feed an event, and the trial_created of each trial it creates (the master commits
        a Create with its trial_created); returns the actions, the Creates' ones inline."""
        if self.conn is None:
            with self.group():
                return self.call(event)
        out = []
        for a in self.log.feed(self.conn, self.exp_id, event):
            out.append(a)
            if isinstance(a, search.Create):
                out += self.call(SearcherEvent("trial_created", a.request_id))
        return out


def drive(trials: int, steps: int, *, mode: str, max_seconds: float, gate: bool = False,
          db_url: str | None = None) -> dict:
    """Run one searcher over `trials` synthetic trials; returns counts, timings and the gate.
    Durable state goes to a fresh SQLite file, or with `db_url` a fresh PostgreSQL database."""
    s = search.make_searcher(searcher_config(trials, steps), HPARAMS, seed=1)
    units = list(s.brackets[0].rung_units)
    ref = RefRule(units, 4.0) if gate else None
    durable = None
    cleanup = contextlib.ExitStack()
    if mode == "durable":
        url = cleanup.enter_context(bench_database(db_url)) or sqlite_url(
            os.path.join(cleanup.enter_context(tempfile.TemporaryDirectory()), "searcher.db"))
        durable = Durable(url, s, searcher_config(trials, steps))
        cleanup.callback(durable.engine.dispose)

    def call(kind: str, rid: str | None = None, metrics: dict | None = None) -> list:
        event = SearcherEvent(kind, rid, metrics=metrics)
        return durable.call(event) if durable else event.apply(s)
    # Made before the clock starts, as the Optuna peer makes its curves before optimize().
    curves = [curve(k, steps) for k in range(trials)]
    ordinal: dict[str, int] = {}
    live: collections.deque[list] = collections.deque()  # [request_id, k, next_step, curve]
    reports = stops = mismatches = 0
    window: dict[int, list[float]] = {}  # trial-ordinal bucket -> [reports, seconds]

    def handle(actions: list) -> None:
        nonlocal stops
        for a in actions:
            if isinstance(a, search.Create):
                k = len(ordinal)
                ordinal[a.request_id] = k
                if durable is None:  # durable mode fed it with the Create
                    handle(call("trial_created", a.request_id))
                live.append([a.request_id, k, 1, curves[k]])
            elif isinstance(a, search.Stop):
                stops += 1

    def settle(item: list, actions: list, since: float, shared: float = 0.0) -> None:
        """After one report: the gate, the close, the trials it lets the searcher create, the
        requeue; charges the time since `since` (plus its share of a group's) to its bucket."""
        nonlocal reports, mismatches
        rid, k, step, values = item
        stopped = any(isinstance(a, search.Stop) for a in actions)
        if ref is not None and ref.decide(k, step, values[step - 1]) != stopped:
            mismatches += 1
        reports += 1
        if stopped or step == steps:
            if durable is not None:
                closing.append(rid)  # its exit reaches the master with the next group
            elif mode != "noop":
                actions += call("trial_closed", rid)
            elif len(ordinal) < trials:
                actions.append(search.Create(f"noop-{len(ordinal)}", {}, 0))
        handle(actions)
        b = window.setdefault(k // max(1, trials // 10), [0, 0.0])
        b[0] += 1
        b[1] += time.perf_counter() - since + shared
        if not stopped and step < steps:
            item[2] = step + 1
            live.append(item)

    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    closing: list[str] = []  # durable mode: trials whose exit is still on its way
    handle(call("start"))
    while (live or closing) and time.perf_counter() < deadline:
        if durable is not None:  # one round of the round-robin is one event group
            group = [live.popleft() for _ in range(len(live))]
            exits, closing[:] = list(closing), []
            t1 = time.perf_counter()
            with durable.group():
                closed = [call("trial_closed", rid) for rid in exits]
                results = [call("validation_completed", rid, {"loss": values[step - 1], "batches": step})
                           for rid, _, step, values in group]
            shared = (time.perf_counter() - t1) / max(1, len(group))
            for actions in closed:
                handle(actions)
            for item, actions in zip(group, results, strict=True):
                settle(item, actions, time.perf_counter(), shared)
            continue
        item = live.popleft()
        rid, k, step, values = item
        t1 = time.perf_counter()
        if mode == "noop":
            actions = [search.Stop(rid)] if step == steps else []
        else:
            actions = call("validation_completed", rid, {"loss": values[step - 1], "batches": step})
        settle(item, actions, t1)
    wall = time.perf_counter() - t0
    cleanup.close()
    first, last = window.get(0), window.get(9)
    cost_first = first[1] / first[0] if first and first[0] else None
    cost_last = last[1] / last[0] if last and last[0] else None
    return {"mode": mode, "trials": len(ordinal), "reports": reports, "stops": stops,
            "wall_s": wall, "reports_per_s": reports / wall,
            "us_per_report_first10pct": cost_first and cost_first * 1e6,
            "us_per_report_last10pct": cost_last and cost_last * 1e6,
            "gate_mismatches": mismatches if gate else None, "complete": not live}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--optuna-trials", type=int, default=1000)
    ap.add_argument("--durable-trials", type=int, default=1000)
    ap.add_argument("--optuna-rdb-trials", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    add_db_arg(ap)
    a = ap.parse_args()
    if a.smoke:
        a.trials, a.durable_trials, a.reps = 200, 50, 1
    peer = not a.smoke and peer_selected("optuna")
    mem, dur, opt_mem, opt_rdb, noop = [], [], [], [], []
    gate = drive(a.trials, a.steps, mode="memory", max_seconds=120, gate=True)
    log("bm3 gate", gate)
    for rep in range(a.reps):  # interleaved A/B/A/B
        mem.append(drive(a.trials, a.steps, mode="memory", max_seconds=120))
        if peer:
            opt_mem.append(run_peer("optuna", "optuna_sha.py", ["--trials", str(a.optuna_trials)]))
        dur.append(drive(a.durable_trials, a.steps, mode="durable", max_seconds=120, gate=True, db_url=a.db_url))
        if peer:
            opt_rdb.append(run_peer("optuna", "optuna_sha.py", ["--trials", str(a.optuna_rdb_trials),
                                                                "--storage", "sqlite"]))
        noop.append(drive(min(a.trials, 1000), a.steps, mode="noop", max_seconds=60))
        log(f"bm3 rep {rep}: ours mem {mem[-1]['reports_per_s']:.0f}/s durable {dur[-1]['reports_per_s']:.0f}/s",
            f"optuna mem {opt_mem[-1]['reports_per_s']:.0f}/s rdb {opt_rdb[-1]['reports_per_s']:.0f}/s" if peer else "")
    r = [m["reports_per_s"] for m in mem]
    scale = [m["us_per_report_last10pct"] / m["us_per_report_first10pct"] for m in mem
             if m["us_per_report_first10pct"] and m["us_per_report_last10pct"]]
    emit({
        "bench": "bm3_searcher", "smoke": a.smoke, "db": backend(a.db_url), "peers": ["optuna"] if peer else [],
        "trials": a.trials, "steps": a.steps,
        "mem_reports_per_s": sorted(r)[len(r) // 2],
        "durable_reports_per_s": sorted(d["reports_per_s"] for d in dur)[len(dur) // 2],
        "noop_reports_per_s": sorted(n["reports_per_s"] for n in noop)[len(noop) // 2],
        "cost_ratio_last_vs_first": sorted(scale)[len(scale) // 2] if scale else None,
        "gate_mismatches": gate["gate_mismatches"], "gate_reports": gate["reports"],
        "gate_ok": gate["gate_mismatches"] == 0,
        "durable_gate_ok": all(d["gate_mismatches"] == 0 for d in dur),
        "ratio_mem_vs_optuna": median_ratio(r, [o["reports_per_s"] for o in opt_mem]) if peer else None,
        "ratio_durable_vs_optuna_rdb": median_ratio([d["reports_per_s"] for d in dur],
                                                    [o["reports_per_s"] for o in opt_rdb]) if peer else None,
        "runs": {"ours_mem": mem, "ours_durable": dur, "optuna_mem": opt_mem, "optuna_rdb": opt_rdb,
                 "noop": noop},
    })


if __name__ == "__main__":
    main()
