"""The sidebar's "Notebooks & TensorBoards" section in headless Chromium against a real master:
a notebook launched over the REST API shows up (queued, then running), its Open button opens the
proxied JupyterLab in a new tab, on the proxy's own origin (ticket traded for a cookie), and the row goes once it is killed;
likewise a TensorBoard over a finished experiment (skipped without the tensorboard package).

Needs what ``conftest.py`` says (Chromium, playwright, the built extension); screenshots go
to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import Client, MasterProcess, wait_experiment, wait_for
from tests.browser.conftest import SKIP_REASON, log_in_if_asked, open_lab, open_sidebar
from tests.integration import _notebooks as nbh
from tests.integration._exp import submit_counter

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow

# The proxied JupyterLab starts a server inside the task: slow on a loaded 2-core machine.
START_TIMEOUT_MS = 180_000


@pytest.fixture(scope="module")
def admin(lab: tuple[MasterProcess, str]) -> Client:
    return lab[0].admin()


@pytest.fixture(scope="module")
def page(lab: tuple[MasterProcess, str], browser: Any) -> Iterator[Any]:
    """The lab with the sidebar open, showing no notebooks yet (so the rows below arrive by
    polling, not with the first load)."""
    page = open_lab(browser, lab)
    open_sidebar(page)
    log_in_if_asked(page)
    sync_api.expect(page.locator('#det-jupyter-sidebar [data-det="tasks"]')).to_have_text("none")
    yield page
    page.close()


def _kill(admin: Client, nb_id: str) -> None:
    try:
        admin.post(f"/api/v1/notebooks/{nb_id}/kill")
    except Exception:  # already gone (the test killed it): nothing to clean up
        pass


@pytest.fixture(scope="module")
def notebook(page: Any, admin: Client) -> Iterator[str]:
    """A notebook (no slots) launched over REST by the admin, the lab's own det user."""
    nb_id = nbh.launch(admin, resources={"slots": 0}, description="sidebar notebook")
    try:
        yield nb_id
    finally:
        _kill(admin, nb_id)


@pytest.fixture(scope="module")
def queued_notebook(page: Any, admin: Client) -> Iterator[str]:
    """A notebook that asks for more slots than the cluster has: it stays queued."""
    nb_id = nbh.launch(admin, resources={"slots": 64}, description="sidebar queued notebook")
    try:
        yield nb_id
    finally:
        _kill(admin, nb_id)


def _wait_running(admin: Client, kind: str, task_id: str) -> None:
    """Wait until the task runs, failing at once, with its log's tail, if it ends instead (a
    sidebar that merely never says "running" would not say why)."""
    def running() -> bool:
        state = admin.get(f"/api/v1/{kind}s/{task_id}")[kind]["state"]
        if state == "STATE_TERMINATED":
            logs = admin.get(f"/api/v1/tasks/{task_id}/logs")
            text = "".join(e["result"]["message"] for e in ([logs] if isinstance(logs, dict) else logs))
            raise AssertionError(f"{kind} {task_id} ended before it ran; its log:\n{text[-2000:]}")
        return state == "STATE_RUNNING"
    wait_for(running, timeout=START_TIMEOUT_MS / 1000, interval=1, what=f"{kind} {task_id} running")


def _row(page: Any, nb_id: str) -> Any:
    return page.locator(f'#det-jupyter-sidebar [data-det="tasks"] tr[data-task-id="{nb_id}"]')


def test_sidebar_lists_notebooks(page: Any, notebook: str, queued_notebook: str, admin: Client,
                                 screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    row = _row(page, notebook)
    expect(row).to_have_attribute("data-task-kind", "notebook")
    expect(row.locator("td").nth(0)).to_have_text("Notebook")
    expect(row.locator("td").nth(1)).to_have_text("sidebar notebook")
    expect(row.locator("td").nth(1)).to_have_attribute("title", f"notebook {notebook}")
    # Polled: queued or starting first, running once its JupyterLab answers.
    _wait_running(admin, "notebook", notebook)
    expect(row.locator(".det-Sidebar-state")).to_have_text("running", timeout=15_000)
    queued = _row(page, queued_notebook)
    expect(queued.locator(".det-Sidebar-state")).to_have_text("queued")
    expect(queued.locator(".det-Sidebar-state")).to_have_class(re.compile(r"\bdet-mod-queued\b"))
    expect(page.locator('#det-jupyter-sidebar [data-det="tasks"] tbody tr')).to_have_count(2)
    path = screenshot(page, "sidebar-notebooks")
    assert path.stat().st_size > 10_000


def test_open_button_opens_proxied_jupyterlab(page: Any, notebook: str, lab: tuple[MasterProcess, str],
                                              admin: Client,
                                              screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    master, _ = lab
    proxy = nbh.proxy_origin(admin, notebook)  # the proxy's own origin, not the master's
    assert proxy != master.url
    row = _row(page, notebook)
    expect(row.locator(".det-Sidebar-state")).to_have_text("running", timeout=START_TIMEOUT_MS)
    with page.context.expect_page() as info:
        row.locator("button.det-Sidebar-open").click()
    tab = info.value
    try:
        tab.set_default_timeout(90_000)
        # The ticket link (`?det_ticket=…`) is traded for a cookie and redirected away.
        tab.wait_for_url(re.compile(rf"^{re.escape(proxy)}/proxy/{notebook}/lab(?!.*det_ticket)"))
        expect(tab).to_have_title(re.compile("JupyterLab"))
        expect(tab.locator("#jp-main-dock-panel")).to_be_visible()
        # Loaded, not just the shell: the splash is gone and the file browser lists the root.
        expect(tab.locator("#jupyterlab-splash")).to_have_count(0)
        # The notebook's JupyterLab shares the master lab's workspaces dir (same OS user) and, on
        # an origin of its own, JupyterLab's window resolver no longer moves it to a fresh
        # workspace: it may restore the master lab's layout (the det-jupyter panel in front).
        files = tab.locator('.jp-SideBar li[data-id="filebrowser"]')
        if "lm-mod-current" not in (files.get_attribute("class") or ""):
            files.click()  # (a click on the current tab would collapse the sidebar)
        expect(tab.locator(".jp-DirListing-content")).to_be_visible()
        assert "det_ticket" not in tab.url
        path = screenshot(tab, "sidebar-notebook-opened")
        assert path.stat().st_size > 10_000
    finally:
        tab.close()
    # The sidebar's own tab is untouched (no error status from the Open).
    expect(page.locator('#det-jupyter-sidebar [data-det="status"]')).not_to_have_class(
        re.compile(r"\bdet-mod-error\b"))


def test_killed_notebooks_leave_the_sidebar(page: Any, notebook: str, queued_notebook: str,
                                            admin: Client,
                                            screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    tasks = page.locator('#det-jupyter-sidebar [data-det="tasks"]')
    expect(_row(page, notebook)).to_have_count(1)
    admin.post(f"/api/v1/notebooks/{notebook}/kill")
    expect(_row(page, notebook)).to_have_count(0, timeout=60_000)
    expect(_row(page, queued_notebook)).to_have_count(1)
    admin.post(f"/api/v1/notebooks/{queued_notebook}/kill")
    expect(tasks).to_have_text("none", timeout=60_000)
    screenshot(page, "sidebar-notebooks-killed")


def test_sidebar_lists_and_opens_tensorboard(page: Any, admin: Client, lab: tuple[MasterProcess, str],
                                             screenshot: Callable[[Any, str], Path]) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard package: pip install -e .[tensorboard]")
    expect = sync_api.expect
    master, _ = lab
    exp_id = submit_counter(admin, length=6, sleep=0.01, ckpt_every=3)
    wait_experiment(admin, exp_id, {"STATE_COMPLETED"})
    tb_id = admin.post("/api/v1/tensorboards", {"experimentIds": [exp_id]})["tensorboard"]["id"]
    try:
        row = _row(page, tb_id)
        expect(row).to_have_attribute("data-task-kind", "tensorboard")
        expect(row.locator("td").nth(0)).to_have_text("TensorBoard")
        expect(row.locator("td").nth(1)).to_have_attribute(
            "title", f"tensorboard {tb_id}; experiments {exp_id}")
        _wait_running(admin, "tensorboard", tb_id)
        expect(row.locator(".det-Sidebar-state")).to_have_text("running", timeout=15_000)
        screenshot(page, "sidebar-tensorboard")
        with page.context.expect_page() as info:
            row.locator("button.det-Sidebar-open").click()
        tab = info.value
        try:
            tab.set_default_timeout(90_000)
            proxy = nbh.proxy_origin(admin, tb_id, "tensorboard")
            tab.wait_for_url(re.compile(rf"^{re.escape(proxy)}/proxy/{tb_id}/(?!.*det_ticket)"))
            expect(tab).to_have_title(re.compile("TensorBoard"))
            # Its scalars dashboard found the trial's run.
            expect(tab.get_by_text(f"experiment_{exp_id}").first).to_be_visible()
            screenshot(tab, "sidebar-tensorboard-opened")
        finally:
            tab.close()
        admin.post(f"/api/v1/tensorboards/{tb_id}/kill")
        expect(_row(page, tb_id)).to_have_count(0, timeout=60_000)
    finally:
        try:
            admin.post(f"/api/v1/tensorboards/{tb_id}/kill")
        except Exception:  # killed above
            pass
