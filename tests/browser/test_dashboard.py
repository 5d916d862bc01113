"""The dashboard inside JupyterLab, in headless Chromium, as a user gets it: the wheel installed
into a fresh virtual environment with no Node on PATH (tests._wheel), ``det-jupyter up``, and a
login through the browser with det credentials. Opened from the sidebar, the experiments table
leads to a finished ASHA search's page with a curve per trial, which a reload restores and the
dark theme recolours; a trial's page filters its log; a crashed experiment's page says why; a
checkpoint is registered as a model version from the trial page and shows in the registry page;
an experiment is killed through the confirmation; a notebook is launched from a button and
reached; ``%det dashboard`` opens a panel. Screenshots go to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import _wheel
from tests._master import ADMIN_PASSWORD, wait_for
from tests.browser.conftest import SKIP_REASON, log_in_if_asked
from tests.integration._exp import submit_counter, trials

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow

TRIALS = 4
# A small ASHA search (1 slot: one trial at a time): 50 ms steps leave a stop decided at a rung
# time to reach the trial before its next checkpoint (tests/integration/test_experiment_loop.py).
ASHA = {"name": "adaptive_asha", "metric": "validation_loss", "time_metric": "batches", "max_time": 12,
        "max_trials": TRIALS, "divisor": 2, "mode": "aggressive"}

# What a chart host draws: per panel, its series and points (chart.js's data attributes).
PANELS_JS = """
(host) => Array.from(host.querySelectorAll('.det-chart-panel')).map(p => {
  const box = p.querySelector('.det-chart-box');
  return {title: p.dataset.title, series: Number(box.dataset.series || 0),
          points: Number(box.dataset.points || 0), lines: p.querySelectorAll('path.det-chart-line').length};
})
"""

LUMA_JS = """
(host) => {
  const t = host.querySelector('svg text');
  const [r, g, b] = getComputedStyle(t).fill.match(/[0-9.]+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}
"""


def _state(master: _wheel.UpMaster, exp_id: int) -> str:
    return master.admin().get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]


@pytest.fixture(scope="module")
def lab(wheel_env: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[_wheel.UpMaster]:
    """The installed wheel's master (one CPU slot), with private lab settings and workspaces;
    its Jupyter root dir is ``master.root``."""
    venv, env = wheel_env
    work = tmp_path_factory.mktemp("dash-wheel")
    news = work / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    # No "official Jupyter news?" or "newer version" toast over the screenshots.
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    master = _wheel.UpMaster(venv, env, work / "root", slots=1, extra_env={
        "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces")})
    master.start()
    try:
        yield master
    finally:
        master.stop()


def open_lab(browser: Any, master: _wheel.UpMaster, path: str = "/lab", *,
             width: int = 1400, height: int = 1100) -> Any:
    """A new page at ``path``, logged in on Jupyter's login page with det credentials."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    page.goto(master.url + path)
    page.wait_for_url(re.compile(r"/login\?next="))
    page.fill("#username_input", "admin")
    page.fill("#password_input", ADMIN_PASSWORD)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/lab"))
    return page


@pytest.fixture(scope="module")
def experiments(lab: _wheel.UpMaster) -> Iterator[dict[str, int]]:
    """A finished ASHA search of TRIALS trials (x log-uniform over 0.01..10 scales the metric,
    y is ignored by the trial), an experiment whose trial raised, and a model to register into."""
    master = lab
    admin = master.admin()
    search = submit_counter(admin, searcher=ASHA, length=12, sleep=0.05, ckpt_every=3,
                            x={"type": "log", "base": 10, "minval": -2, "maxval": 1},
                            y={"type": "double", "minval": 1, "maxval": 2})
    crashed = submit_counter(admin, raise_at=3, max_restarts=0)
    for exp_id in (search, crashed):
        wait_for(lambda e=exp_id: _state(master, e) in ("STATE_COMPLETED", "STATE_ERROR"), timeout=240,
                 what=f"experiment {exp_id} to end")
    assert _state(master, search) == "STATE_COMPLETED" and _state(master, crashed) == "STATE_ERROR"
    admin.post("/api/v1/models", {"name": "dash-model"})
    yield {"search": search, "crashed": crashed}


def _wait_saved(page: Any, master: _wheel.UpMaster, panel_id: str) -> None:
    """Wait until JupyterLab's saved workspace names ``panel_id`` (what a reload restores); asked
    with the page's login cookie."""
    def saved() -> bool:
        answer = page.request.get(f"{master.url}/lab/api/workspaces")
        return answer.ok and panel_id in answer.text()
    wait_for(saved, timeout=30, interval=0.5, what=f"the workspace to hold {panel_id}")


def _open_dashboard(page: Any) -> None:
    # The saved workspace may have restored the sidebar open already (a click would close it).
    page.locator("#jupyterlab-splash").wait_for(state="detached")
    tab = page.locator('.jp-SideBar li[data-id="det-jupyter-sidebar"]')
    sidebar = page.locator("#det-jupyter-sidebar")
    for _ in range(3):  # a click toggles: open it, or close and reopen it
        if sidebar.is_visible():
            break
        tab.click()
        time.sleep(1)
    sidebar.wait_for(state="visible")
    log_in_if_asked(page)
    page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]').click()
    sync_api.expect(page.locator("#det-dash-experiments")).to_be_visible()


def test_experiment_pages_curves_reload_theme_and_trial_logs(
        lab: _wheel.UpMaster, browser: Any, experiments: dict[str, int],
        screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master = lab
    search = experiments["search"]
    admin = master.admin()
    # What the page must draw, from the REST API: each trial's validations (ASHA may stop some
    # at a rung) and its sampled x.
    ts = trials(admin, search)
    assert len(ts) == TRIALS
    validations = sum(len([w for w in admin.get(f"/api/v1/trials/{t['id']}/workloads")["workloads"]
                           if "validation" in w]) for t in ts)
    xs = [float(t["hparams"]["x"]) for t in ts]
    page = open_lab(browser, master)
    try:
        _open_dashboard(page)
        table = page.locator("#det-dash-experiments .det-Dash-table")
        row = table.locator(f'tr[data-key="{search}"]')
        expect(row).to_be_visible()
        expect(table.locator(f'tr[data-key="{experiments["crashed"]}"] td[data-col="state"]')).to_have_text("ERROR")
        screenshot(page, "dashboard-experiments")
        row.locator('td[data-col="name"]').click()

        panel = page.locator(f"#det-dash-experiment-{search}")
        expect(panel).to_be_visible()
        curves = panel.locator('[data-det="curves"]')
        started = time.time()
        page.wait_for_function(
            f"(h) => {{ const p = ({PANELS_JS})(h); return p.length === 1 && p[0].lines === {TRIALS}; }}",
            arg=curves.element_handle(), timeout=30_000)
        print(f"experiment page: {TRIALS} curves drawn {time.time() - started:.2f} s after the click")
        (drawn,) = page.evaluate(PANELS_JS, curves.element_handle())
        assert drawn["title"] == "validation.validation_loss" and drawn["series"] == TRIALS
        assert drawn["points"] == validations
        coords = page.evaluate(PANELS_JS, panel.locator('[data-det="coords"]').element_handle())
        assert coords and coords[0]["series"] == TRIALS
        expect(panel.locator('[data-det="importance"] [data-hp="x"]')).to_be_visible()
        # The contour of the two hyperparameters: every trial a dot, the plane filled in.
        contour = panel.locator('[data-det="contour"]')
        expect(contour.locator(".det-chart-box")).to_have_attribute("data-series", str(TRIALS))
        assert contour.locator("circle.det-chart-marker").count() == TRIALS
        assert contour.locator("rect.det-chart-cell").count() > 100
        contour.scroll_into_view_if_needed()
        screenshot(panel.locator(".det-Dash-body"), "dashboard-experiment-full")
        # x's axis is logarithmic where the sampled values span two decades (chart.js's rule).
        spans = max(xs) / min(xs) >= 100
        expect(panel.locator('[data-det="coords"] .det-chart-axis-title', has_text="x (log)")).to_have_count(
            1 if spans else 0)
        screenshot(page, "dashboard-experiment")

        # Reloaded: the panel is restored and draws every curve again. (JupyterLab saves the
        # layout to its workspace a moment after a change: wait until it holds the panel.)
        _wait_saved(page, master, f"det-dash-experiment-{search}")
        page.reload()
        tab = page.locator(".lm-TabBar-tab", has_text=re.compile(rf"^det: experiment {search}$"))
        expect(tab).to_have_count(1, timeout=60_000)
        tab.click()
        panel = page.locator(f"#det-dash-experiment-{search}")
        expect(panel).to_be_visible()
        curves = panel.locator('[data-det="curves"]')
        page.wait_for_function(
            f"(h) => {{ const p = ({PANELS_JS})(h); return p.length === 1 && p[0].lines === {TRIALS}; }}",
            arg=curves.element_handle(), timeout=30_000)
        light = page.evaluate(LUMA_JS, curves.element_handle())
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
        page.wait_for_function(f"(h) => ({LUMA_JS})(h) > 0.5", arg=curves.element_handle(), timeout=20_000)
        screenshot(page, "dashboard-experiment-dark")
        assert light < 0.5

        # A trial's page: one chart per metric, its log filtered by a search.
        first = min(t["id"] for t in trials(master.admin(), search))
        panel.locator(f'.det-Dash-table tr[data-key="{first}"] td[data-col="state"]').click()
        trial = page.locator(f"#det-dash-trial-{first}")
        expect(trial).to_be_visible()
        charts = trial.locator('[data-det="metrics"]')
        page.wait_for_function(f"(h) => ({PANELS_JS})(h).length >= 3", arg=charts.element_handle())
        titles = [p["title"] for p in page.evaluate(PANELS_JS, charts.element_handle())]
        assert titles == ["batches", "loss", "step", "validation_loss"], titles
        log = trial.locator('[data-det="log"]')
        expect(log).to_contain_text("run 1 starting at step 0")
        everything = int(log.get_attribute("data-lines") or 0)
        trial.locator('[data-det="log-search"]').fill("starting at step")
        trial.locator('[data-det="log-search"]').press("Enter")
        expect(log).to_have_attribute("data-lines", "1")
        expect(log).to_contain_text("run 1 starting at step 0")
        assert everything > 1
        screenshot(page, "dashboard-trial")
    finally:
        page.close()


def test_crash_register_kill_and_launch(lab: _wheel.UpMaster, browser: Any, experiments: dict[str, int],
                                       screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master = lab
    admin = master.admin()
    page = open_lab(browser, master)
    try:
        _open_dashboard(page)
        # A closed panel opens again (a new one) from the same button.
        page.locator(".lm-TabBar-tab", has_text=re.compile(r"^det: experiments$")).locator(
            ".lm-TabBar-tabCloseIcon").click()
        expect(page.locator("#det-dash-experiments")).to_have_count(0)
        page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]').click()
        expect(page.locator("#det-dash-experiments")).to_be_visible()
        # The crashed experiment's page says why its trial failed.
        crashed = experiments["crashed"]
        page.locator(f'#det-dash-experiments tr[data-key="{crashed}"] td[data-col="name"]').click()
        exp_panel = page.locator(f"#det-dash-experiment-{crashed}")
        expect(exp_panel.locator(".det-Dash-crashes")).to_contain_text("ValueError: boom at step 3")

        # Register a checkpoint of the search's first trial from its page.
        first = min(t["id"] for t in trials(admin, experiments["search"]))
        ckpt = admin.get(f"/api/v1/trials/{first}/checkpoints")["checkpoints"][-1]["uuid"]
        exp_id = experiments["search"]
        page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]').click()
        page.locator(f'#det-dash-experiments tr[data-key="{exp_id}"] td[data-col="name"]').click()
        page.locator(f'#det-dash-experiment-{exp_id} .det-Dash-table tr[data-key="{first}"] td[data-col="state"]').click()
        trial = page.locator(f"#det-dash-trial-{first}")
        row = trial.locator(f'.det-Dash-table tr[data-key="{ckpt}"]')
        row.locator('[data-det="register"]').select_option("dash-model")
        expect(trial.locator(".det-Dash-status")).to_contain_text(f"registered {ckpt} as version 1 of dash-model")
        page.locator('#det-jupyter-sidebar [data-det="dash-registry"]').click()
        registry = page.locator("#det-dash-registry")
        registry.locator('tr[data-key="dash-model"] td[data-col="name"]').click()
        expect(registry.locator('tr[data-key="1"] td[data-col="uuid"]')).to_have_text(ckpt)
        screenshot(page, "dashboard-registry")

        # Kill a running experiment: nothing happens until the confirmation's Yes.
        running = submit_counter(admin, length=600, sleep=0.5)
        wait_for(lambda: _state(master, running) == "STATE_RUNNING", timeout=90, what="a running experiment")
        page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]').click()
        table = page.locator("#det-dash-experiments")
        box = table.locator(f'tr[data-key="{running}"] input[type="checkbox"]')
        expect(box).to_be_visible(timeout=15_000)
        box.check()
        table.locator('button[data-verb="kill"]').click()
        confirm = table.locator(".det-Dash-confirm")
        expect(confirm).to_contain_text(f"Kill 1 experiment(s): {running}?")
        time.sleep(1)
        assert _state(master, running) == "STATE_RUNNING"  # asked, not done
        screenshot(page, "dashboard-kill-confirm")
        confirm.locator('[data-det="confirm-yes"]').click()
        wait_for(lambda: _state(master, running) == "STATE_CANCELED", timeout=60, what="the kill")

        # Launch a notebook from its button; the tab reaches its JupyterLab.
        with page.context.expect_page() as info:
            table.locator('[data-det="launch-notebook"]').click()
        tab = info.value
        tab.set_default_timeout(180_000)
        tab.wait_for_url(re.compile(r"/proxy/[^/]+/lab(?!.*det_ticket)"))
        expect(tab).to_have_title(re.compile("JupyterLab"))
        expect(tab.locator("#jp-main-dock-panel")).to_be_visible()
        screenshot(tab, "dashboard-launched-notebook")
        tab.close()
    finally:
        page.close()


def test_det_magic_opens_a_dashboard_panel(lab: _wheel.UpMaster, browser: Any,
                                           experiments: dict[str, int]) -> None:
    expect = sync_api.expect
    master = lab
    search = experiments["search"]
    (master.root / "dash.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": f"%load_ext det_jupyter\n%det dashboard experiment {search}"}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))
    page = open_lab(browser, master, "/lab/tree/dash.ipynb", height=1000)
    try:
        notebook = page.locator(".jp-NotebookPanel")
        expect(page.get_by_text("(ipykernel) | Idle").first).to_be_visible(timeout=90_000)
        notebook.locator(".jp-Notebook-cell").first.click()
        page.keyboard.press("Shift+Enter")
        link = notebook.locator('[data-det="open-dashboard"]')
        expect(link).to_have_text(f"Open experiment {search} in the det dashboard", timeout=60_000)
        link.click()
        expect(page.locator(f"#det-dash-experiment-{search}")).to_be_visible()
    finally:
        page.close()
