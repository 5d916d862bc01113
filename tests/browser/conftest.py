"""What the browser tests share: a real master serving JupyterLab with the built extension,
headless Chromium (Debian's, driven by the ``playwright`` package; never ``playwright
install``), screenshots under ``tests/browser/artifacts/``.

Every module here skips (``SKIP_REASON``), saying why, without Chromium, playwright or the
built extension (``scripts/build_labextension.sh``). ``DET_TEST_CHROMIUM`` overrides the browser's path.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._master import REPO, MasterProcess
from tests.conftest import run_started

CHROMIUM = os.environ.get("DET_TEST_CHROMIUM", "/usr/bin/chromium")
BUILT = REPO / "det_jupyter" / "labextension"
ARTIFACTS = Path(__file__).parent / "artifacts"
# build-machine-notes.md; Playwright adds --headless and a fresh profile itself.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    if not (BUILT / "package.json").is_file():
        return f"the lab extension is not built ({BUILT} missing): run scripts/build_labextension.sh"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set DET_TEST_CHROMIUM)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "JupyterLab is not installed (pip install -e '.[test]')"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright; scripts/test.sh does)"
    return None


SKIP_REASON = _missing()  # modules here skip with it: `pytest.skip(SKIP_REASON, allow_module_level=True)`


@pytest.fixture(scope="session")
def artifacts(pytestconfig: pytest.Config) -> Path:
    """The screenshot folder, with every screenshot older than this run removed: no stale
    screenshot passes for this run's (and, under xdist, no worker removes another's)."""
    ARTIFACTS.mkdir(exist_ok=True)
    started = run_started(pytestconfig)
    for old in ARTIFACTS.iterdir():
        if old.is_file() and old.stat().st_mtime < started:
            old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="session")
def screenshot(artifacts: Path) -> Callable[[Any, str], Path]:
    """``screenshot(page_or_locator, name)`` → the PNG's path under ``artifacts/``."""
    def take(target: Any, name: str) -> Path:
        path = artifacts / f"{name}.png"
        target.screenshot(path=str(path))
        print(f"screenshot: {path}")
        return path
    return take


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MasterProcess, str]]:
    """A master (one CPU slot) serving JupyterLab with the built extension (found through
    JUPYTER_PATH, so an editable install works), private lab settings and workspaces, and a
    fresh root dir; yields it and its Jupyter token. One per module: each module's
    experiments have the slot to themselves."""
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
    # The server's root dir is its working directory: notebooks the tests create land there.
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
def browser() -> Iterator[Any]:
    from playwright import sync_api

    # expect() waits up to 30 s, not Playwright's 5 s: a loaded 2-core machine takes longer than
    # that to open a notebook in JupyterLab (a CI run failed on it). A passing check returns as
    # soon as it holds; a test that means a shorter or longer wait says so.
    sync_api.expect.set_options(timeout=30_000)
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def open_lab(browser: Any, lab: tuple[MasterProcess, str], *,
             width: int = 1400, height: int = 900) -> Any:
    """A new page showing the lab, logged in with the server's token."""
    master, token = lab
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    page.goto(f"{master.url}/lab?token={token}")
    return page


def open_sidebar(page: Any) -> None:
    """Show the det-jupyter panel (its icon in the left bar). The icon toggles the panel, and
    JupyterLab may restore a layout with the panel already open (the workspace another page of
    the same user saved): a click that closed it is clicked again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    tab = page.locator('.jp-SideBar li[data-id="det-jupyter-sidebar"]')
    sidebar = page.locator("#det-jupyter-sidebar")
    for _ in range(3):
        if not sidebar.is_visible():
            tab.click()
        try:
            sidebar.wait_for(state="visible", timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    sidebar.wait_for(state="visible")


def log_in_if_asked(page: Any) -> None:
    """The Jupyter user is a det user (POST /det-jupyter/session): the sidebar shows its content
    without asking for a second login."""
    from playwright import sync_api

    sidebar = page.locator("#det-jupyter-sidebar")
    form = sidebar.locator('[data-det="login"]')
    content = sidebar.locator('[data-det="content"]')
    # Both start hidden; the first poll shows one of them.
    page.wait_for_selector(
        '#det-jupyter-sidebar [data-det="login"]:not([hidden]),'
        ' #det-jupyter-sidebar [data-det="content"]:not([hidden])')
    sync_api.expect(content).to_be_visible()
    assert not form.is_visible(), "the sidebar asked for a det login although Jupyter has one"
