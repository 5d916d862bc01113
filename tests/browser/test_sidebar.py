"""The JupyterLab sidebar in headless Chromium against a real master (``det-jupyter up``,
which serves JupyterLab too): it lists a running experiment, its job and the cluster, and its
Open button describes the experiment in a new console, or in a new cell of the current notebook.

Needs Debian's ``chromium`` (``DET_TEST_CHROMIUM`` overrides the path), the Python
``playwright`` package (driving that browser; never ``playwright install``) and the built
extension (``scripts/build_labextension.sh``). Screenshots go to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import REPO, MasterProcess
from tests.integration._exp import submit_counter

CHROMIUM = os.environ.get("DET_TEST_CHROMIUM", "/usr/bin/chromium")
BUILT = REPO / "det_jupyter" / "labextension"
ARTIFACTS = Path(__file__).parent / "artifacts"
# build-machine-notes.md; Playwright adds --headless and a fresh profile itself.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not (BUILT / "package.json").is_file():
    pytest.skip(f"the lab extension is not built ({BUILT} missing): run scripts/build_labextension.sh",
                allow_module_level=True)
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set DET_TEST_CHROMIUM)",
                allow_module_level=True)
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install -e '.[test]')")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the playwright package is not installed (pip install playwright; "
                               "scripts/test.sh does)")

pytestmark = pytest.mark.slow


def screenshot(page: object, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))  # type: ignore[attr-defined]
    print(f"screenshot: {path}")
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MasterProcess, str]]:
    """A master serving JupyterLab with the built extension (found through JUPYTER_PATH, so
    an editable install works) and private lab settings and workspaces."""
    work = tmp_path_factory.mktemp("lab")
    (work / "jupyter" / "labextensions").mkdir(parents=True)
    (work / "jupyter" / "labextensions" / "det-jupyter").symlink_to(BUILT)
    news = work / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    # No "official Jupyter news?" or "newer version" toast over the screenshots.
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    token = secrets.token_hex(16)
    env = {
        "JUPYTER_TOKEN": token,
        "JUPYTER_PATH": str(work / "jupyter"),
        "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
    }
    master = MasterProcess(work / "master", slots=1, env=env)
    # The server's root dir is its working directory: notebooks the test creates land in `work`.
    (work / "root").mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(work / "root")
        try:
            master.start()
        finally:
            os.chdir(cwd)
        yield master, token
    finally:
        master.stop()


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
def page(lab: tuple[MasterProcess, str]) -> Iterator[object]:
    master, token = lab
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # no stale screenshot passes for this run's
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{master.url}/lab?token={token}")
            page.locator('.jp-SideBar li[data-id="det-jupyter-sidebar"]').click()
            sidebar = page.locator("#det-jupyter-sidebar")
            sidebar.wait_for(state="visible")
            yield page
        finally:
            browser.close()


def log_in_if_asked(page: object) -> None:
    """The Jupyter user is a det user (POST /det-jupyter/session): the sidebar shows its content
    without asking for a second login."""
    sidebar = page.locator("#det-jupyter-sidebar")  # type: ignore[attr-defined]
    form = sidebar.locator('[data-det="login"]')
    content = sidebar.locator('[data-det="content"]')
    # Both start hidden; the first poll shows one of them.
    page.wait_for_selector(  # type: ignore[attr-defined]
        '#det-jupyter-sidebar [data-det="login"]:not([hidden]),'
        ' #det-jupyter-sidebar [data-det="content"]:not([hidden])')
    sync_api.expect(content).to_be_visible()
    assert not form.is_visible(), "the sidebar asked for a det login although Jupyter has one"


def test_sidebar_lists_running_experiment(page: object, running_experiment: int) -> None:
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
    expect(sidebar.locator('[data-det="tasks"]')).to_contain_text("none")
    # Live: the page was open before the experiment existed (fixture order), and it keeps polling.
    status = sidebar.locator('[data-det="status"]')
    before = status.inner_text()
    assert before.startswith("updated ")
    expect(status).not_to_have_text(before, timeout=15_000)
    path = screenshot(page, "sidebar-running-experiment")
    assert path.stat().st_size > 10_000


def test_open_button_describes_experiment_in_console(page: object, running_experiment: int) -> None:
    expect = sync_api.expect
    log_in_if_asked(page)
    sidebar = page.locator("#det-jupyter-sidebar")  # type: ignore[attr-defined]
    sidebar.locator(f'tr[data-experiment-id="{running_experiment}"] button.det-Sidebar-open').click()
    console = page.locator(".jp-ConsolePanel")  # type: ignore[attr-defined]
    expect(console).to_be_visible()
    expect(console.locator(".jp-CodeConsole-content")).to_contain_text(
        f"%det e describe {running_experiment}", timeout=60_000)
    screenshot(page, "sidebar-open-experiment-console")


def test_open_button_adds_cell_to_current_notebook(page: object, running_experiment: int) -> None:
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
