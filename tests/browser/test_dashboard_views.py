"""The dashboard's views of issue 28, in headless Chromium against a master serving the built
extension (tests/browser/conftest.py): an ``adaptive_asha`` search's rungs table on its
experiment page, checked against a table computed here from the trials' validations read
through the REST API; a metric column of the experiments table; a model's notes and metadata
edited in the registry page; two experiments compared on one chart. Screenshots go to
``tests/browser/artifacts/``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._master import MasterProcess, create_experiment, wait_for
from tests.browser.conftest import SKIP_REASON, log_in_if_asked, open_lab
from tests.integration._exp import COUNTER, counter_config, submit_counter, trials

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow

TRIALS = 4
LENGTH = 16
RUNGS = 2
DIVISOR = 2
# One aggressive bracket of 2 rungs (at 8 and 16 batches) over 4 trials that validate every 4
# batches; the counter reports its step as the "batches" metric.
ASHA = {"name": "adaptive_asha", "metric": "validation_loss", "time_metric": "batches", "max_time": LENGTH,
        "max_trials": TRIALS, "max_rungs": RUNGS, "divisor": DIVISOR, "mode": "aggressive"}
SINGLE = {"name": "single", "metric": "validation_loss", "max_length": {"batches": 8}}
TERMINAL = ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR")
# The seed of the search's sampled x (so the same trials are stopped at the first rung each run).
SEED = 1

# What a chart host draws: per panel, its series and lines (chart.js's data attributes).
PANELS_JS = """
(host) => Array.from(host.querySelectorAll('.det-chart-panel')).map(p => {
  const box = p.querySelector('.det-chart-box');
  return {title: p.dataset.title, series: Number(box.dataset.series || 0),
          lines: p.querySelectorAll('path.det-chart-line').length};
})
"""
# The names of a chart's lines (each line's SVG title).
NAMES_JS = "(host) => Array.from(host.querySelectorAll('path.det-chart-line > title')).map(t => t.textContent)"


def _state(master: MasterProcess, exp_id: int) -> str:
    return master.admin().get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]


@pytest.fixture(scope="module")
def experiments(lab: tuple[MasterProcess, str]) -> Iterator[dict[str, int]]:
    """A finished ASHA search (x, a double, scales the metric), a finished single-trial
    experiment, and a model."""
    master, _ = lab
    admin = master.admin()
    config = yaml.safe_load(counter_config(searcher=ASHA, length=LENGTH, sleep=0.05, ckpt_every=4,
                                           x={"type": "double", "minval": 0.1, "maxval": 10}))
    config["reproducibility"] = {"experiment_seed": SEED}
    search = create_experiment(admin, yaml.safe_dump(config), COUNTER)["experiment"]["id"]
    single = submit_counter(admin, searcher=SINGLE, length=8, sleep=0.02, ckpt_every=4, x=0.5)
    for exp_id in (search, single):
        wait_for(lambda e=exp_id: _state(master, e) in TERMINAL, timeout=300, what=f"experiment {exp_id} to end")
    assert _state(master, search) == "STATE_COMPLETED" and _state(master, single) == "STATE_COMPLETED"
    admin.post("/api/v1/models", {"name": "views-model", "notes": "old notes", "metadata": {"a": "1", "n": 2}})
    yield {"search": search, "single": single}


def _validations(admin: Any, trial_id: int) -> list[tuple[int, dict[str, Any]]]:
    """A trial's validations as (batches, metrics), in step order, from its workloads."""
    out = []
    for w in admin.get(f"/api/v1/trials/{trial_id}/workloads")["workloads"]:
        if "validation" in w:
            v = w["validation"]
            out.append((int(v["totalBatches"]), v["metrics"]["avgMetrics"]))
    return sorted(out, key=lambda p: p[0])


def _expected_rungs(admin: Any, exp_id: int) -> list[dict[str, Any]]:
    """The rungs table, computed here from the config and each trial's validations: a trial
    reached a rung once it validated at or past its batches; a finished trial whose highest rung
    is not the last stopped there; a rung's best is the lowest loss of a first report past it."""
    units = [LENGTH // DIVISOR ** (RUNGS - 1 - i) for i in range(RUNGS)]
    rows: list[dict[str, Any]] = [{"units": u, "reached": [], "stopped": [], "best": None} for u in units]
    for t in sorted(trials(admin, exp_id), key=lambda t: t["id"]):
        reports = _validations(admin, t["id"])
        top = -1
        for i, row in enumerate(rows):
            first = next((m for b, m in reports if m.get("batches", b) >= row["units"]), None)
            if first is None:
                continue
            top = i
            row["reached"].append(t["id"])
            loss = first["validation_loss"]
            row["best"] = loss if row["best"] is None else min(row["best"], loss)
        if 0 <= top < len(rows) - 1:
            assert t["state"] in TERMINAL
            rows[top]["stopped"].append(t["id"])
    return rows


def _ids(xs: list[int]) -> str:
    return ", ".join(str(x) for x in xs)


def _open_sidebar(page: Any) -> None:
    """Show the det-jupyter sidebar, logged in. The saved workspace may have restored it open
    already (a click on its tab would close it)."""
    page.locator("#jupyterlab-splash").wait_for(state="detached")
    tab = page.locator('.jp-SideBar li[data-id="det-jupyter-sidebar"]')
    sidebar = page.locator("#det-jupyter-sidebar")
    for _ in range(3):
        if sidebar.is_visible():
            break
        tab.click()
        page.wait_for_timeout(1000)
    sidebar.wait_for(state="visible")
    log_in_if_asked(page)


def _open_experiments(page: Any) -> Any:
    _open_sidebar(page)
    page.locator('#det-jupyter-sidebar [data-det="dash-experiments"]').click()
    table = page.locator("#det-dash-experiments")
    sync_api.expect(table).to_be_visible()
    return table


def _close_tab(page: Any, label: str) -> None:
    page.locator(".lm-TabBar-tab", has_text=re.compile(f"^{re.escape(label)}$")).locator(
        ".lm-TabBar-tabCloseIcon").click()


def test_asha_rungs_and_metric_columns(lab: tuple[MasterProcess, str], browser: Any, experiments: dict[str, int],
                                       screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, _ = lab
    admin = master.admin()
    search = experiments["search"]
    expected = _expected_rungs(admin, search)
    assert expected[0]["reached"], "no trial reached the first rung"
    assert expected[0]["stopped"], f"ASHA stopped no trial at the first rung (seed {SEED}): {expected}"
    # The master's route says the same (the page draws what it sends).
    served = admin.get(f"/api/v1/experiments/{search}/asha-rungs")["rungs"]
    assert [(r["units"], r["reached"], r["stopped"], r["running"]) for r in served] == [
        (e["units"], e["reached"], e["stopped"], []) for e in expected]
    page = open_lab(browser, lab)
    try:
        table = _open_experiments(page)
        # A metric column: the best trial's latest validation_loss, as the REST API gives it.
        exp = admin.get(f"/api/v1/experiments/{search}")["experiment"]
        best = admin.get(f"/api/v1/trials/{exp['bestTrialId']}")["trial"]
        want = best["summaryMetrics"]["validation_metrics"]["validation_loss"]["last"]
        table.locator("details.det-Dash-columns summary").click()
        box = table.locator('input[data-metric="validation.validation_loss"]')
        expect(box).to_be_visible()
        box.check()
        cell = table.locator(f'tr[data-key="{search}"] td[data-col="metric:validation.validation_loss"]')
        expect(cell).not_to_have_text("")
        assert math.isclose(float(cell.inner_text()), want, rel_tol=1e-3), (cell.inner_text(), want)
        head = table.locator('th[data-col="metric:validation.validation_loss"]')
        expect(head).to_have_text("validation.validation_loss")
        cell.scroll_into_view_if_needed()
        screenshot(page, "dashboard-metric-column")

        # The experiment page's rungs table.
        table.locator(f'tr[data-key="{search}"] td[data-col="name"]').click()
        panel = page.locator(f"#det-dash-experiment-{search}")
        rungs = panel.locator('[data-det="rungs"] .det-Dash-table')
        expect(rungs.locator("tbody tr")).to_have_count(len(expected))
        expect(rungs.locator('th[data-col="units"]')).to_have_text("batches")
        for i, e in enumerate(expected):
            row = rungs.locator(f'tr[data-key="{i}"]')
            expect(row.locator('td[data-col="units"]')).to_have_text(str(e["units"]))
            expect(row.locator('td[data-col="reached"]')).to_have_text(_ids(e["reached"]))
            expect(row.locator('td[data-col="stopped"]')).to_have_text(_ids(e["stopped"]))
            expect(row.locator('td[data-col="running"]')).to_have_text("")
            if e["best"] is not None:
                assert math.isclose(float(row.locator('td[data-col="best"]').inner_text()), e["best"], rel_tol=1e-3)
        panel.locator('[data-det="rungs"]').scroll_into_view_if_needed()
        screenshot(panel.locator('[data-det="rungs"]'), "dashboard-asha-rungs")
    finally:
        page.close()


def test_model_notes_and_metadata(lab: tuple[MasterProcess, str], browser: Any, experiments: dict[str, int],
                                  screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, _ = lab
    admin = master.admin()
    page = open_lab(browser, lab)
    try:
        _open_sidebar(page)
        page.locator('#det-jupyter-sidebar [data-det="dash-registry"]').click()
        registry = page.locator("#det-dash-registry")
        registry.locator('tr[data-key="views-model"] td[data-col="name"]').click()
        notes = registry.locator('[data-det="model-notes"]')
        expect(notes).to_have_value("old notes")
        notes.fill("# Notes\nsaved from the dashboard")
        registry.locator('[data-det="save-notes"]').click()
        wait_for(lambda: admin.get("/api/v1/models/views-model")["model"]["notes"]
                 == "# Notes\nsaved from the dashboard", timeout=20, what="the notes to be saved")

        meta = registry.locator('[data-det="model-metadata"]')
        expect(meta.locator('[data-det="metadata-key"]')).to_have_count(2)
        # Remove "a", change "n" (a number: saved back as JSON), add "owner".
        rows = meta.locator(".det-Dash-metadata-row")
        keys = [rows.nth(i).locator('[data-det="metadata-key"]').input_value() for i in range(2)]
        assert sorted(keys) == ["a", "n"]
        rows.nth(keys.index("a")).locator('[data-det="metadata-remove"]').click()
        expect(rows).to_have_count(1)
        meta.locator('[data-det="metadata-value"]').fill("3")
        registry.locator('[data-det="metadata-add"]').click()
        meta.locator('[data-det="metadata-key"]').nth(1).fill("owner")
        meta.locator('[data-det="metadata-value"]').nth(1).fill("team a")
        registry.locator('[data-det="save-metadata"]').click()
        want = {"n": 3, "owner": "team a"}
        wait_for(lambda: admin.get("/api/v1/models/views-model")["model"]["metadata"] == want, timeout=20,
                 what="the metadata to be saved")
        model = admin.get("/api/v1/models/views-model")["model"]
        assert model["notes"] == "# Notes\nsaved from the dashboard" and model["metadata"] == want
        screenshot(page, "dashboard-model-notes")

        # Reopened: the saved values show.
        _close_tab(page, "det: model registry")
        expect(page.locator("#det-dash-registry")).to_have_count(0)
        page.locator('#det-jupyter-sidebar [data-det="dash-registry"]').click()
        registry = page.locator("#det-dash-registry")
        registry.locator('tr[data-key="views-model"] td[data-col="name"]').click()
        expect(registry.locator('[data-det="model-notes"]')).to_have_value("# Notes\nsaved from the dashboard")
        meta = registry.locator('[data-det="model-metadata"]')
        expect(meta.locator('[data-det="metadata-key"]')).to_have_count(2)
        shown = {meta.locator('[data-det="metadata-key"]').nth(i).input_value():
                 meta.locator('[data-det="metadata-value"]').nth(i).input_value() for i in range(2)}
        assert shown == {"n": "3", "owner": "team a"}
    finally:
        page.close()


def test_compare_experiments(lab: tuple[MasterProcess, str], browser: Any, experiments: dict[str, int],
                             screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, _ = lab
    admin = master.admin()
    ids = [experiments["search"], experiments["single"]]
    want_names = sorted(f"exp {e} / trial {t['id']}" for e in ids for t in trials(admin, e))
    page = open_lab(browser, lab)
    try:
        table = _open_experiments(page)
        compare = table.locator('[data-det="compare"]')
        expect(compare).to_be_disabled()
        for e in ids:
            table.locator(f'tr[data-key="{e}"] input[type="checkbox"]').check()
        compare.click()
        panel = page.locator(f"#det-dash-compare-{min(ids)}-{max(ids)}")
        expect(panel).to_be_visible()
        curves = panel.locator('[data-det="compare-curves"]')
        page.wait_for_function(
            f"(h) => {{ const p = ({PANELS_JS})(h); return p.length === 1 && p[0].lines === {len(want_names)}; }}",
            arg=curves.element_handle(), timeout=30_000)
        (drawn,) = page.evaluate(PANELS_JS, curves.element_handle())
        assert drawn["title"] == "validation.validation_loss" and drawn["series"] == len(want_names)
        assert sorted(page.evaluate(NAMES_JS, curves.element_handle())) == want_names
        rows = panel.locator('[data-det="compare-table"] tbody tr')
        expect(rows).to_have_count(2)
        for e in ids:
            exp = admin.get(f"/api/v1/experiments/{e}")["experiment"]
            row = panel.locator(f'[data-det="compare-table"] tr[data-key="{e}"]')
            expect(row.locator('td[data-col="searcher"]')).to_contain_text(exp["config"]["searcher"]["name"])
            expect(row.locator('td[data-col="best-trial"]')).to_have_text(str(exp["bestTrialId"]))
            assert math.isclose(float(row.locator('td[data-col="best"]').inner_text()),
                                exp["bestTrialSearcherMetric"], rel_tol=1e-3)
            best = admin.get(f"/api/v1/trials/{exp['bestTrialId']}")["trial"]
            expect(row.locator('td[data-col="hparams"]')).to_contain_text("x=")
            assert f"length={best['hparams']['length']}" in row.locator('td[data-col="hparams"]').inner_text()
        screenshot(page, "dashboard-compare")
    finally:
        page.close()
