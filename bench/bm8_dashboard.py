"""BM-8: dashboard time to first chart, det-jupyter's JupyterLab dashboard vs Optuna Dashboard,
with a static-page floor.

Setup (untimed; ``_bm8_seed.py``): a real master (SQLite, no agent) serving JupyterLab with the
built extension holds ``experiments`` one-trial experiments and two of ``trials`` trials x
``steps`` steps, loaded as BM-5 loads them: ``val`` (searcher metric ``validation_loss``,
validated every 100 steps: its page's first chart is ``validation.validation_loss``, ``trials``
curves of ``steps/100`` points) and ``loss`` (searcher metric ``loss``, no validations: its first
chart is ``training.loss``, each curve thinned by the master to 40000/trials = 200 points).
Chromium: headless, tests/browser's flags, one browser for every side.

Timed, in every round, the sides in turn (their order rotating), in ms on the page's clock:
- ``table_ms``: pointer press on the sidebar's Dashboard button -> the experiments table's first
  page (50 rows) in the DOM;
- ``ours_ms`` / ``ours_loss_ms``: pointer press on the experiment's row in that table -> its
  page's curves chart holds a line per trial, in every round in a fresh lab page on an empty
  workspace of its own (its load and login untimed), which experiment goes first alternating;
  the time-series request's span on the same clock splits it (``*_request_*``);
- ``optuna_dashboard_ms``: Optuna Dashboard (bench/.venv-optuna-dashboard, made if missing)
  serving a study of the same trials x steps intermediate values (peers/optuna_dashboard.py):
  its study list loaded, pointer press on the study's link -> the study page's intermediate
  values plot (``#graph-intermediate-values``) holds a trace per trial. The same definition as
  ours: an in-app navigation in an already loaded single-page app;
- ``floor_ms`` / ``floor_loss_ms``: a static page (``_bm8_browser.FLOOR_HTML``, served from
  disk by ``http.server``) that imports the dashboard's plotting module (chart.js) and draws the
  very panel the experiment page draws (the same request's answer saved as JSON): navigation
  (fresh context) -> lines drawn.

Targets (benchmarks.md): ours <= 0.5x Optuna Dashboard, <= 2 s, <= 1.5x the floor (ratios:
median of per-round ratios, ours / theirs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _bm8_browser import click_and_time, navigate_and_time, write_floor
from _bm8_seed import floor_panel, seed
from _common import BENCH, REPO, emit, log, median, peer_selected

from tests._master import free_port, wait_for
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, log_in_if_asked, open_sidebar

OD_VENV = BENCH / ".venv-optuna-dashboard"
OD_PINS = ["optuna-dashboard==0.21.0", "optuna==5.0.0"]
CHART_JS = REPO / "det_jupyter" / "widgets" / "static" / "chart.js"
PAGE = 50  # labextension/src/dash_experiments.ts: rows per page
LINES = ".det-chart-panel path.det-chart-line"


def ensure_od_venv() -> Path:
    py = OD_VENV / "bin" / "python"
    if not py.exists():
        log(f"creating {OD_VENV} with {OD_PINS}")
        subprocess.run([sys.executable, "-m", "venv", str(OD_VENV)], check=True)
        subprocess.run([str(OD_VENV / "bin" / "pip"), "install", "-q", *OD_PINS], check=True)
    return py


def _served(argv: list[str], url: str, log_path: Path) -> subprocess.Popen:
    """A server process, once ``url`` answers."""
    out = open(log_path, "ab")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            return False
    wait_for(up, timeout=60, interval=0.2, what=url)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _ratio(a: list[float], b: list[float]) -> float | None:
    return median([x / y for x, y in zip(a, b, strict=False) if x and y])


def _ours(page: Any, exp_id: int, trials: int) -> dict[str, Any]:
    """Open experiment ``exp_id`` from the experiments table and time its curves."""
    if not page.locator("#det-dash-experiments").is_visible():
        page.locator('.lm-TabBar-tab[data-id="det-dash-experiments"]').click()
    row = page.locator(f'#det-dash-experiments tr[data-key="{exp_id}"] td[data-col="name"]')
    panel = f"det-dash-experiment-{exp_id}"
    r = click_and_time(page, row, f'#{panel} [data-det="curves"] {LINES}', trials, request_part="time-series",
                       also={"trials_request": f"/experiments/{exp_id}/trials"})
    box = page.locator(f'#{panel} [data-det="curves"] .det-chart-box').first
    r["points"] = int(box.get_attribute("data-points") or 0)
    return r


def _lab_round(browser: Any, master: Any, token: str, workspace: str, rows: int, exps: list[int],
               trials: int) -> dict[Any, Any]:
    """A fresh lab page on an empty workspace of its own, logged in: the table from the
    sidebar's Dashboard button, then each experiment of ``exps`` from the table, in that order.
    (A fresh page, not a closed and reopened panel: a dashboard panel closed by its tab stays in
    the extension's tracker, detached, and the sidebar's buttons then do not show it again.)"""
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    try:
        page.set_default_timeout(120_000)
        page.goto(f"{master.url}/lab/workspaces/{workspace}?token={token}")
        page.locator("#jupyterlab-splash").wait_for(state="detached")
        open_sidebar(page)
        log_in_if_asked(page)
        button = page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]')
        out: dict[Any, Any] = {"table": click_and_time(page, button, "#det-dash-experiments .det-Dash-table tbody tr",
                                                       rows, request_part="api/v1/experiments?")}
        for k, exp_id in enumerate(exps):
            out[exp_id] = {**_ours(page, exp_id, trials), "order": k}
        return out
    finally:
        page.context.close()


def _optuna(browser: Any, url: str, study_id: int, trials: int) -> dict[str, Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
    try:
        page = ctx.new_page()
        page.set_default_timeout(180_000)
        page.goto(f"{url}/dashboard")
        link = page.locator(f'a[href$="/dashboard/studies/{study_id}"]').first
        return click_and_time(page, link, "#graph-intermediate-values .scatterlayer .trace", trials,
                              timeout_ms=180_000, request_part=f"/api/studies/{study_id}")
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="5 trials x 20 steps, 5 experiments, 1 round, no peer")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--experiments", type=int, default=1000, help="one-trial experiments in the table")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.smoke:
        a.trials, a.steps, a.experiments, a.rounds = 5, 20, 5, 1
    peer = not a.smoke and peer_selected("optuna")
    from playwright import sync_api

    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bm8-") as d, contextlib.ExitStack() as stack:
        work = Path(d)
        od_url = study_id = None
        if peer:
            py = ensure_od_venv()
            made = json.loads(subprocess.run(
                [str(py), str(BENCH / "peers" / "optuna_dashboard.py"), "--db", str(work / "optuna.db"),
                 "--trials", str(a.trials), "--steps", str(a.steps)],
                check=True, capture_output=True, text=True, timeout=600).stdout.strip().splitlines()[-1])
            log(f"bm8: optuna study seeded in {made['seed_s']:.1f}s")
            port = free_port()
            od_url, study_id = f"http://127.0.0.1:{port}", made["study_id"]
            od = _served([str(OD_VENV / "bin" / "optuna-dashboard"), made["storage"], "--host", "127.0.0.1",
                          "--port", str(port)], f"{od_url}/api/meta", work / "optuna-dashboard.log")
            stack.callback(_stop, od)
        seeded = seed(work / "lab", trials=a.trials, steps=a.steps, n_small=a.experiments)
        master = seeded.master
        master.start(timeout=120)
        stack.callback(master.stop)
        site = work / "site"
        write_floor(site, CHART_JS)
        client = master.admin()
        (site / "val.json").write_text(json.dumps(floor_panel(client, seeded.val_exp, "validation.validation_loss",
                                                              a.trials)))
        (site / "loss.json").write_text(json.dumps(floor_panel(client, seeded.loss_exp, "training.loss", a.trials)))
        sport = free_port()
        static = _served([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(site),
                          str(sport)], f"http://127.0.0.1:{sport}/index.html", work / "static.log")
        stack.callback(_stop, static)
        floor_url = f"http://127.0.0.1:{sport}/index.html?data="
        floor_sel = f"#chart {LINES}"
        rows = min(PAGE, a.experiments + 2)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                rep = 0

                def ours() -> dict[str, Any]:
                    # Which experiment is opened first (its page loads chart.js) alternates.
                    exps = [seeded.val_exp, seeded.loss_exp][::1 if rep % 2 == 0 else -1]
                    got = _lab_round(browser, master, seeded.token, f"bm8-{rep}-{time.monotonic_ns()}", rows, exps,
                                     a.trials)
                    return {"table": got["table"], "val": got[seeded.val_exp], "loss": got[seeded.loss_exp]}

                def floor() -> dict[str, Any]:
                    return {k: navigate_and_time(browser, floor_url + k, floor_sel, a.trials, request_part=".json")
                            for k in ("val", "loss")}

                sides = [("ours", ours), ("floor", floor)]
                if peer:
                    sides.append(("optuna", lambda: _optuna(browser, od_url, study_id, a.trials)))
                ours()  # warm-up, untimed: the lab's first use of the dashboard loads its modules
                for rep in range(a.rounds):  # noqa: B007 (ours() reads it)
                    got = {}
                    for name, fn in sides[rep % len(sides):] + sides[:rep % len(sides)]:
                        got[name] = fn()
                    r = {"table_ms": got["ours"]["table"]["ms"], "ours_ms": got["ours"]["val"]["ms"],
                         "ours_loss_ms": got["ours"]["loss"]["ms"], "floor_ms": got["floor"]["val"]["ms"],
                         "floor_loss_ms": got["floor"]["loss"]["ms"],
                         "optuna_dashboard_ms": got["optuna"]["ms"] if peer else None, "detail": got}
                    rounds.append(r)
                    log(f"bm8 round {rep}: " + json.dumps({k: v for k, v in r.items() if k != "detail"}))
            finally:
                browser.close()
    med = {k: median([r[k] for r in rounds if r[k] is not None]) for k in
           ("table_ms", "ours_ms", "ours_loss_ms", "floor_ms", "floor_loss_ms", "optuna_dashboard_ms")}
    col = {k: [r[k] for r in rounds] for k in ("ours_ms", "ours_loss_ms", "floor_ms", "floor_loss_ms",
                                              "optuna_dashboard_ms")}
    ratio_optuna = _ratio(col["ours_ms"], col["optuna_dashboard_ms"]) if peer else None
    ratio_loss_optuna = _ratio(col["ours_loss_ms"], col["optuna_dashboard_ms"]) if peer else None
    ratio_floor = _ratio(col["ours_ms"], col["floor_ms"])
    ratio_loss_floor = _ratio(col["ours_loss_ms"], col["floor_loss_ms"])

    def split(side: str, key: str) -> float | None:
        vals = [r["detail"]["ours"][side].get(key) for r in rounds]
        return median([v for v in vals if v is not None])

    emit({
        "bench": "bm8_dashboard", "smoke": a.smoke, "db": "sqlite", "peers": ["optuna-dashboard"] if peer else [],
        "trials": a.trials, "steps": a.steps, "experiments": a.experiments + 2, **med,
        "ours_points": rounds[-1]["detail"]["ours"]["val"].get("points"),
        "ours_loss_points": rounds[-1]["detail"]["ours"]["loss"].get("points"),
        # Where ours goes: press -> time-series request sent (experiment + trials fetched, the
        # chart module loaded), the request, its answer -> lines drawn (parse, build, draw).
        "ours_request_start_ms": split("val", "request_start_ms"),
        "ours_request_ms": split("val", "request_ms"),
        "ours_trials_request_end_ms": split("val", "trials_request_end_ms"),
        "ours_after_response_ms": median([r["ours_ms"] - r["detail"]["ours"]["val"]["response_end_ms"]
                                          for r in rounds if "response_end_ms" in r["detail"]["ours"]["val"]]),
        "ours_loss_request_start_ms": split("loss", "request_start_ms"),
        "ours_loss_request_ms": split("loss", "request_ms"),
        "ours_loss_trials_request_end_ms": split("loss", "trials_request_end_ms"),
        "ours_loss_after_response_ms": median([r["ours_loss_ms"] - r["detail"]["ours"]["loss"]["response_end_ms"]
                                               for r in rounds if "response_end_ms" in r["detail"]["ours"]["loss"]]),
        "ratio_vs_optuna": ratio_optuna, "ratio_loss_vs_optuna": ratio_loss_optuna,
        "ratio_vs_floor": ratio_floor, "ratio_loss_vs_floor": ratio_loss_floor,
        "meets_vs_optuna": None if ratio_optuna is None else ratio_optuna <= 0.5,
        "meets_loss_vs_optuna": None if ratio_loss_optuna is None else ratio_loss_optuna <= 0.5,
        "meets_2s": med["ours_ms"] <= 2000, "meets_loss_2s": med["ours_loss_ms"] <= 2000,
        "meets_vs_floor": ratio_floor is not None and ratio_floor <= 1.5,
        "meets_loss_vs_floor": ratio_loss_floor is not None and ratio_loss_floor <= 1.5,
        "rounds": rounds,
    })


if __name__ == "__main__":
    main()
