"""The experiment widget in a real notebook, in headless Chromium against a real master
(``det-jupyter up``, which serves JupyterLab too): a cell runs ``%det e describe ID`` while the
trial reports a training metric every half second, and the rendered training chart gains
points, the validation chart never falls back to empty axes, and the layout fits the notebook.
Then the notebook is saved and the page reloaded: every chart is drawn again (from the
kernel's widget state), and in the dark theme the charts' text turns light.

The point counts are read in the page, from our chart widget's panels inside the cell's
output (``det_jupyter/widgets/static/chart.js``): the points it drew (``data-points``), the
line's SVG path and the validation markers (one SVG circle per point). Needs what
``conftest.py`` says (Chromium, playwright, the built extension); screenshots go to
``tests/browser/artifacts/``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import MasterProcess
from tests.browser.conftest import SKIP_REASON
from tests.integration._exp import submit_counter, trials

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow

STEP_S = 0.5  # one training report per step
CKPT_EVERY = 4  # a validation report (and a checkpoint) every 4 steps: every 2 s

# The chart panels of the cell's output, by their title.
CHARTS_JS = """
(output) => {
  const charts = {};
  for (const p of output.querySelectorAll('.det-chart-panel')) {
    if (p.dataset.title) charts[p.dataset.title] = p;
  }
  return charts;
}
"""

# What each panel draws now.
SAMPLE_JS = """
(output) => {
  const charts = (CHARTS_JS)(output);
  const out = {};
  for (const [title, p] of Object.entries(charts)) {
    const box = p.querySelector('.det-chart-box');
    const line = p.querySelector('path.det-chart-line');
    out[title] = {
      traces: Number(box.dataset.series || 0),
      points: Number(box.dataset.points || 0),
      path: line ? line.getAttribute('d') || '' : '',
      lines: p.querySelectorAll('path.det-chart-line').length,
      markers: p.querySelectorAll('circle.det-chart-marker').length,
    };
  }
  return out;
}
""".replace("CHARTS_JS", CHARTS_JS)

# Boxes (viewport pixels) of what the layout checks compare.
BOXES_JS = """
(output) => {
  const box = (el) => { const r = el.getBoundingClientRect();
                        return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const charts = (CHARTS_JS)(output);
  const out = {output: box(output), charts: {}, titles: {}, axisTitles: []};
  for (const [title, p] of Object.entries(charts)) {
    out.charts[title] = box(p.querySelector('svg'));
    out.titles[title] = box(p.firstElementChild);
  }
  const pc = charts['hyperparameters'];
  if (pc) for (const t of pc.querySelectorAll('.det-chart-axis-title')) out.axisTitles.push(box(t));
  return out;
}
""".replace("CHARTS_JS", CHARTS_JS)

# The luminance (0 dark .. 1 light) of the training chart's axis labels as drawn now.
TEXT_LUMA_JS = """
(output) => {
  const p = (CHARTS_JS)(output)['training'];
  const t = p.querySelector('svg text');
  const [r, g, b] = getComputedStyle(t).fill.match(/[0-9.]+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}
""".replace("CHARTS_JS", CHARTS_JS)


@pytest.fixture(scope="module")
def slow_experiment(lab: tuple[MasterProcess, str]) -> Iterator[int]:
    """A counter experiment reporting training metrics every STEP_S for minutes, RUNNING
    with a few reports done when the test starts (killed at the end)."""
    master, _ = lab
    client = master.admin()
    exp_id = submit_counter(
        client, length=600, sleep=STEP_S, ckpt_every=CKPT_EVERY,
        searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 600}},
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            ts = trials(client, exp_id)
            if ts and ts[0].get("totalBatchesProcessed", 0) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"experiment {exp_id}'s trial reported nothing within 90 s:\n{master.log()[-3000:]}")
        yield exp_id
    finally:
        client.post(f"/api/v1/experiments/{exp_id}/kill")


def _intersects(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _notebook(root: Path, name: str, source: str) -> None:
    """A notebook file with one code cell, in the server's root dir."""
    (root / name).write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
                   "outputs": [], "source": source}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}))


def test_experiment_widget_chart_gains_points_while_the_trial_runs(
        lab: tuple[MasterProcess, str], browser: Any, slow_experiment: int,
        screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, token = lab
    # conftest's lab: the server's root dir lies beside the master's data dir.
    _notebook(master.data_dir.parent / "root", "chart.ipynb",
              f"%load_ext det_jupyter\n%det e describe {slow_experiment}")
    # 1280 px with the file browser open: a normal notebook width, not a wide one (tall, so
    # that the whole widget is in view for the screenshots).
    page = browser.new_page(viewport={"width": 1280, "height": 1500})
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{master.url}/lab/tree/chart.ipynb?token={token}")
        notebook = page.locator(".jp-NotebookPanel")
        expect(notebook).to_be_visible()
        # Running before the kernel is up can lose the run.
        expect(page.get_by_text("(ipykernel) | Idle").first).to_be_visible(timeout=90_000)
        # The kernel acts as the server's det user on its own (no login in the cell).
        notebook.locator(".jp-Notebook-cell").first.click()
        page.keyboard.press("Shift+Enter")

        output = notebook.locator(".jp-Notebook-cell").first.locator(".jp-OutputArea-output").last
        expect(output).to_contain_text(f"Experiment {slow_experiment}", timeout=90_000)
        expect(output).to_contain_text("RUNNING")
        handle = output.element_handle()
        page.wait_for_function(
            f"(o) => {{ const s = ({SAMPLE_JS})(o); return s.training && s.training.points > 0"
            " && s.validation && s.validation.markers > 0 && s.hyperparameters; }",
            arg=handle, timeout=60_000)

        first = page.evaluate(SAMPLE_JS, handle)
        output.scroll_into_view_if_needed()
        shot1 = screenshot(page, "widget-chart-1")
        screenshot(output, "widget-output-1")
        # Sample for a while: the chart grows, and the validation chart keeps its points at
        # every moment (no empty axes between two updates).
        samples = [first]
        deadline = time.time() + 8
        while time.time() < deadline:
            time.sleep(0.25)
            samples.append(page.evaluate(SAMPLE_JS, handle))
        last = samples[-1]
        shot2 = screenshot(page, "widget-chart-2")
        screenshot(output, "widget-output-2")

        print("training points {} -> {}, validation markers {} -> {} in {} samples".format(
            first["training"]["points"], last["training"]["points"],
            first["validation"]["markers"], last["validation"]["markers"], len(samples)))
        assert last["training"]["points"] > first["training"]["points"], (first, last)
        assert last["training"]["path"] != first["training"]["path"], "the drawn line did not change"
        assert last["validation"]["markers"] > first["validation"]["markers"], (first, last)
        empty = [i for i, s in enumerate(samples) if not s["validation"]["markers"]
                 or not s["training"]["path"]]
        assert not empty, f"a chart showed empty axes in samples {empty}: {samples}"
        # ... while the trial ran (not a burst of points at its end).
        client = master.admin()
        (trial,) = trials(client, slow_experiment)
        assert trial["state"] == "STATE_RUNNING"
        assert shot1.stat().st_size > 10_000 and shot2.stat().st_size > 10_000

        # The layout fits: every chart inside the output (none clipped at its right edge), and
        # the hyperparameters title clear of the parallel-coordinates axis labels.
        boxes = page.evaluate(BOXES_JS, handle)
        for title, box in boxes["charts"].items():
            assert box["right"] <= boxes["output"]["right"] + 1, (title, box, boxes["output"])
        title = boxes["titles"]["hyperparameters"]
        assert boxes["axisTitles"], "the parallel-coordinates plot has no axis labels"
        overlaps = [b for b in boxes["axisTitles"] if _intersects(title, b)]
        assert not overlaps, f"the title {title} overlaps axis labels {overlaps}"
        light = page.evaluate(TEXT_LUMA_JS, handle)

        # Saved and reloaded: the same charts are drawn again, from the kernel's widget state,
        # and go on growing.
        page.keyboard.press("Control+s")
        expect(page.locator(".jp-NotebookPanel .jp-mod-dirty")).to_have_count(0)
        before = page.evaluate(SAMPLE_JS, handle)
        page.reload()
        notebook = page.locator(".jp-NotebookPanel")
        output = notebook.locator(".jp-Notebook-cell").first.locator(".jp-OutputArea-output").last
        expect(output).to_contain_text(f"Experiment {slow_experiment}", timeout=90_000)
        handle = output.element_handle()
        page.wait_for_function(
            f"(o) => {{ const s = ({SAMPLE_JS})(o); return s.training && s.training.points > {before['training']['points']}"
            " && s.validation && s.validation.markers > 0 && s.hyperparameters"
            " && s.hyperparameters.lines > 0; }", arg=handle, timeout=60_000)
        output.scroll_into_view_if_needed()
        screenshot(output, "widget-output-reloaded")

        # The dark theme: the charts' text follows it (light on dark), with no redraw.
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_function(f"(o) => ({TEXT_LUMA_JS})(o) > 0.5", arg=handle, timeout=20_000)
        dark = page.evaluate(TEXT_LUMA_JS, handle)
        screenshot(output, "widget-output-dark")
        print(f"axis label luminance: light theme {light:.2f}, dark theme {dark:.2f}")
        assert light < 0.5 < dark
    finally:
        page.close()
