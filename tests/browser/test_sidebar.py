"""The JupyterLab sidebar in headless Chromium against a real master (``det-jupyter up``,
which serves JupyterLab too): it lists a running experiment, its job and the cluster, and its
Open button describes the experiment in a new console, or in a new cell of the current notebook.

Needs what ``conftest.py`` says (Chromium, playwright, the built extension); screenshots go
to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import MasterProcess
from tests.browser.conftest import SKIP_REASON, log_in_if_asked, open_lab, open_sidebar
from tests.integration._exp import submit_counter

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def running_experiment(lab: tuple[MasterProcess, str]) -> Iterator[int]:
    """A counter experiment that runs for minutes (killed at the end)."""
    master, _ = lab
    client = master.admin()
    exp_id = submit_counter(
        client, length=600, sleep=0.5, ckpt_every=4,
        searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 600}},
    )
    try:
        yield exp_id
    finally:
        client.post(f"/api/v1/experiments/{exp_id}/kill")


@pytest.fixture(scope="module")
def page(lab: tuple[MasterProcess, str], browser: Any) -> Iterator[Any]:
    page = open_lab(browser, lab)
    open_sidebar(page)
    yield page
    page.close()


def test_sidebar_lists_running_experiment(page: object, running_experiment: int,
                                          screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    log_in_if_asked(page)
    sidebar = page.locator("#det-jupyter-sidebar")  # type: ignore[attr-defined]
    row = sidebar.locator(f'tr[data-experiment-id="{running_experiment}"]')
    # Polled, not pushed: the row appears, then turns RUNNING once the trial's process starts.
    expect(row.locator(".det-Sidebar-state")).to_have_text("RUNNING", timeout=90_000)
    expect(row).to_contain_text("counter")
    # validation_loss = 1/step every 4 steps: a best metric shows once the first is reported.
    expect(row.locator("td").nth(4)).not_to_have_text("", timeout=30_000)
    jobs = sidebar.locator('[data-det="jobs"] tbody tr')
    expect(jobs.first).to_contain_text("counter")
    expect(jobs.first).to_contain_text("1/1")
    expect(sidebar.locator('[data-det="cluster-summary"]')).to_have_text("1 agent, 1/1 slots used")
    expect(sidebar.locator('[data-det="tasks"]')).to_have_text("none")  # no notebooks or TensorBoards here
    # Live: the page was open before the experiment existed (fixture order), and it keeps polling.
    status = sidebar.locator('[data-det="status"]')
    before = status.inner_text()
    assert before.startswith("updated ")
    expect(status).not_to_have_text(before, timeout=15_000)
    path = screenshot(page, "sidebar-running-experiment")
    assert path.stat().st_size > 10_000


def test_open_button_describes_experiment_in_console(page: object, running_experiment: int,
                                                     screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    log_in_if_asked(page)
    sidebar = page.locator("#det-jupyter-sidebar")  # type: ignore[attr-defined]
    sidebar.locator(f'tr[data-experiment-id="{running_experiment}"] button.det-Sidebar-open').click()
    console = page.locator(".jp-ConsolePanel")  # type: ignore[attr-defined]
    expect(console).to_be_visible()
    expect(console.locator(".jp-CodeConsole-content")).to_contain_text(
        f"%det e describe {running_experiment}", timeout=60_000)
    screenshot(page, "sidebar-open-experiment-console")


def test_open_button_adds_cell_to_current_notebook(page: object, running_experiment: int,
                                                   screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    log_in_if_asked(page)
    page.locator(".lm-TabBar-tab", has_text="Launcher").click()  # type: ignore[attr-defined]
    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()  # type: ignore[attr-defined]
    notebook = page.locator(".jp-NotebookPanel")  # type: ignore[attr-defined]
    expect(notebook).to_be_visible()
    expect(notebook.locator(".jp-Notebook-cell")).to_have_count(1)
    sidebar = page.locator("#det-jupyter-sidebar")  # type: ignore[attr-defined]
    sidebar.locator(f'tr[data-experiment-id="{running_experiment}"] button.det-Sidebar-open').click()
    cells = notebook.locator(".jp-Notebook-cell")
    expect(cells).to_have_count(2)
    expect(cells.nth(1)).to_contain_text(f"%det e describe {running_experiment}")
    # ... and ran it (what it prints is the magic's business, tested with the magics).
    expect(cells.nth(1).locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=60_000)
    screenshot(page, "sidebar-open-experiment-notebook")
