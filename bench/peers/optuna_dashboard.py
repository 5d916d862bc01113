"""BM-8's peer data: an Optuna study of ``trials`` complete trials, each with ``steps``
intermediate values (what ``trial.report(value, step)`` stores) and a final value, in an SQLite
RDB storage that ``optuna-dashboard sqlite:///…`` then serves. Runs in bench/.venv-optuna-dashboard.

The trials are added whole through Optuna (``create_trial`` + ``add_trial``, with their final
value) and their intermediate values are then written straight into Optuna's own table
``trial_intermediate_values`` with one ``executemany``: the rows ``report()`` would store, but
200,000 ``report()`` calls (or ``create_trial(intermediate_values=…)``, which took 251 s here)
would make the setup take minutes. The curves are the ones bm8_dashboard.py's master holds: ``1/step + i/1000`` for trial i.
Prints one JSON line: the storage URL, the study id and the seeding time.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial


def curve(i: int, step: int) -> float:
    return 1.0 / step + i / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", required=True, help="path of the SQLite file to create")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{a.db}"
    t0 = time.perf_counter()
    study = optuna.create_study(study_name="bm8", storage=url, direction="minimize")
    dist = {"x": FloatDistribution(0.0, 1.0)}
    for i in range(a.trials):
        study.add_trial(create_trial(state=TrialState.COMPLETE, value=curve(i, a.steps), params={"x": i / a.trials},
                                     distributions=dist))
    trial_ids = [t._trial_id for t in study.get_trials(deepcopy=False)]
    con = sqlite3.connect(a.db)
    with con:
        con.executemany(
            "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type)"
            " VALUES (?, ?, ?, 'FINITE')",
            ((tid, s, curve(i, s)) for i, tid in enumerate(trial_ids) for s in range(1, a.steps + 1)))
    con.close()
    # A fresh storage: the one above caches the finished trials as they were added.
    got = optuna.load_study(study_name="bm8", storage=url).get_trials(deepcopy=False)
    assert len(got) == a.trials and all(len(t.intermediate_values) == a.steps for t in got), "seeding failed"
    print(json.dumps({"storage": url, "study_id": study._study_id, "trials": a.trials, "steps": a.steps,
                      "seed_s": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
