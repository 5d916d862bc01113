"""BM-8's setup: a real master serving JupyterLab with the built extension (as the browser
tests start it), holding ``n_small`` one-trial experiments and two experiments of ``trials``
trials x ``steps`` training steps, their metrics bulk-loaded as BM-5 loads them
(``bm5_query.load``: 5 training metrics per step, ``loss`` among them, through
``MetricService.ingest``), with the master stopped.

- ``val``: searcher metric ``validation_loss``, reported every 100 steps (every step in smoke
  sizes below 100): its page's first chart is ``validation.validation_loss``.
- ``loss``: searcher metric ``loss`` and no validations: its page's first chart is
  ``training.loss``, every trial thinned by the master to ``40000 / trials`` points.

Both are created after the small ones, so they head the experiments table (newest first).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from _common import log
from bm5_query import load

from det_jupyter.services.common.clock import Clock
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store import make_engine, sqlite_url
from tests._master import Client, MasterProcess, create_experiment
from tests.browser.conftest import BUILT

POINT_BUDGET = 40000  # labextension/src/dash_experiment.ts: the curves' points in all


@dataclass(frozen=True)
class Seeded:
    master: MasterProcess
    token: str  # the Jupyter token
    val_exp: int
    loss_exp: int
    trials: int
    steps: int


def per_trial(trials: int) -> int:
    """maxDatapoints the experiment page asks for (dash_experiment.ts's rule)."""
    return max(20, min(1000, POINT_BUDGET // trials))


def lab_master(work: Path) -> tuple[MasterProcess, str]:
    """A master (no agent: nothing runs) with JupyterLab and the built extension, private
    settings and workspaces (tests/browser/conftest.py's ``lab`` fixture, minus the slot)."""
    (work / "jupyter" / "labextensions").mkdir(parents=True)
    (work / "jupyter" / "labextensions" / "det-jupyter").symlink_to(BUILT)
    news = work / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    (work / "root").mkdir()
    token = secrets.token_hex(16)
    env = {"JUPYTER_TOKEN": token, "JUPYTER_PATH": str(work / "jupyter"),
           "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces")}
    return MasterProcess(work / "master", env=env, extra_args=["--no-agent"], cwd=work / "root"), token


def _config(name: str, metric: str, trials: int, steps: int) -> str:
    return yaml.safe_dump({
        "name": name, "entrypoint": "true", "max_restarts": 0,
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": metric, "max_trials": trials,
                     "max_concurrent_trials": trials, "max_length": {"batches": steps}}})


def _trial_ids(client: Client, exp_id: int, trials: int) -> list[int]:
    tids = [t["id"] for t in client.get(f"/api/v1/experiments/{exp_id}/trials?limit=1000")["trials"]]
    if len(tids) != trials:
        raise RuntimeError(f"experiment {exp_id}: expected {trials} trials, got {len(tids)}")
    return tids


def _load_validations(db_url: str, trial_ids: list[int], steps: int, every: int) -> None:
    svc = MetricService(make_engine(db_url), Clock())
    now = time.time()
    for i, tid in enumerate(trial_ids):
        svc.ingest(tid, None, [Report("validation", s, {"validation_loss": 1.0 / s + i / 1000}, now)
                               for s in range(every, steps + 1, every)])


def seed(work: Path, *, trials: int, steps: int, n_small: int) -> Seeded:
    """Create everything, load the metrics with the master stopped; returns it stopped."""
    master, token = lab_master(work)
    master.start(timeout=120)
    t0 = time.perf_counter()
    try:
        client = master.admin()
        small = _config("bm8-small", "loss", 1, 1)
        for _ in range(n_small):
            create_experiment(client, small, None)
        log(f"bm8: {n_small} small experiments created in {time.perf_counter() - t0:.1f}s")
        loss_exp = create_experiment(client, _config("bm8-loss", "loss", trials, steps), None)["experiment"]["id"]
        val_exp = create_experiment(client, _config("bm8-val", "validation_loss", trials, steps),
                                    None)["experiment"]["id"]
        loss_tids, val_tids = _trial_ids(client, loss_exp, trials), _trial_ids(client, val_exp, trials)
    finally:
        master.stop()
    t1 = time.perf_counter()
    db = sqlite_url(str(master.data_dir / "det.db"))
    load(db, loss_tids + val_tids, 1, steps)
    _load_validations(db, val_tids, steps, 100 if steps >= 100 else max(1, steps // 10))
    log(f"bm8: {2 * trials * steps * 5} training points loaded in {time.perf_counter() - t1:.1f}s")
    return Seeded(master, token, val_exp, loss_exp, trials, steps)


def floor_panel(client: Client, exp_id: int, metric: str, trials: int) -> dict:
    """The panel the experiment page draws for ``metric`` (``group.name``), from the same
    request it makes (dash_experiment.ts ``_series`` + ``_drawCurves``, x = batches)."""
    tids = sorted(_trial_ids(client, exp_id, trials))
    q = "&".join(f"trialIds={t}" for t in tids)
    body = client.get(f"/api/v1/trials/time-series?maxDatapoints={per_trial(trials)}&metricIds={metric}&{q}")
    by_id = {int(e["trial"]["id"]): [d for m in e.get("metrics", []) for d in m.get("data", [])]
             for e in body["trials"]}
    name = metric.split(".", 1)[1]
    series = []
    for i, tid in enumerate(tids):
        pts = by_id.get(tid, [])
        series.append({"name": f"trial {tid}", "x": [p["batches"] for p in pts],
                       "y": [p["values"].get(name) for p in pts], "mode": "lines", "color": i})
    return {"title": metric, "xlabel": "batches", "ylabel": name, "empty": "no metrics yet", "series": series}
