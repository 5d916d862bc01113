"""The sidebar's layout and its clickable rows, in headless Chromium against a real master: at
any panel width (200px to 800px) every cell and every Open button lies inside the panel, nothing
scrolls sideways, and a very long name is cut with an ellipsis (whole in its tooltip); a click,
Enter or Space anywhere on an experiment's row describes it (once, even on the Open button), and
a click on a notebook's row opens it.

Needs what ``conftest.py`` says (Chromium, playwright, the built extension); screenshots go
to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._master import Client, MasterProcess, create_experiment
from tests.browser.conftest import SKIP_REASON, log_in_if_asked, open_lab, open_sidebar
from tests.integration import _notebooks as nbh
from tests.integration._exp import COUNTER, counter_config

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright import sync_api  # noqa: E402

pytestmark = pytest.mark.slow

LONG_NAME = ("a-very-long-experiment-name-that-goes-on-" * 5)[:150]
LONG_DESCRIPTION = ("a queued notebook with a description far longer than any sidebar is wide " * 2).strip()
# 250px is about JupyterLab's default (and, through --jp-sidebar-min-width, its narrowest).
WIDTHS = (200, 250, 400, 800)

# Every visible cell, name and Open button of the panel's tables, and what sticks out where.
GEOMETRY_JS = """
panel => {
  const box = panel.getBoundingClientRect();
  const out = [];
  const describe = el => `${el.tagName.toLowerCase()}.${el.className} "${el.textContent.slice(0, 30)}"`;
  const outside = (r, b) => r.left < b.left - 0.5 || r.right > b.right + 0.5;
  const items = panel.querySelectorAll(
    '.det-Sidebar-table th, .det-Sidebar-table td, .det-Sidebar-name, .det-Sidebar-open');
  let visible = 0;
  for (const el of items) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;  // a column a narrow panel drops
    visible++;
    if (outside(r, box)) out.push(`${describe(el)} [${r.left}, ${r.right}] outside the panel`);
    const cell = el.closest('td, th');
    // A cell clips what overflows it: a button cut by its cell is as bad as one cut by the panel.
    if (cell && cell !== el && outside(r, cell.getBoundingClientRect())) {
      out.push(`${describe(el)} [${r.left}, ${r.right}] outside its cell`);
    }
  }
  for (const table of panel.querySelectorAll('.det-Sidebar-table')) {
    if (table.scrollWidth > table.clientWidth + 1) out.push(`a table scrolls: ${table.scrollWidth}`);
  }
  if (panel.scrollWidth > panel.clientWidth) {
    out.push(`the panel scrolls sideways: ${panel.scrollWidth} > ${panel.clientWidth}`);
  }
  return {width: box.width, visible, out};
}
"""


@pytest.fixture(scope="module")
def admin(lab: tuple[MasterProcess, str]) -> Client:
    return lab[0].admin()


@pytest.fixture(scope="module")
def long_experiment(admin: Client) -> Iterator[int]:
    """A counter experiment with a 150-character name that runs for minutes (killed at the end)."""
    config = yaml.safe_load(counter_config(
        length=600, sleep=0.5, ckpt_every=4,
        searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 600}}))
    config["name"] = LONG_NAME
    exp_id = create_experiment(admin, yaml.safe_dump(config), COUNTER)["experiment"]["id"]
    try:
        yield exp_id
    finally:
        admin.post(f"/api/v1/experiments/{exp_id}/kill")


@pytest.fixture(scope="module")
def queued_notebook(admin: Client) -> Iterator[str]:
    """A notebook asking for more slots than the cluster has: it stays queued (starts nothing)."""
    nb_id = nbh.launch(admin, resources={"slots": 64}, description=LONG_DESCRIPTION)
    try:
        yield nb_id
    finally:
        admin.post(f"/api/v1/notebooks/{nb_id}/kill")


@pytest.fixture(scope="module")
def page(lab: tuple[MasterProcess, str], browser: Any, long_experiment: int,
         queued_notebook: str) -> Iterator[Any]:
    page = open_lab(browser, lab)
    # JupyterLab's floor for a side panel is 250px; a theme (or this) may lower it.
    page.add_style_tag(content=":root { --jp-sidebar-min-width: 150px !important; }")
    open_sidebar(page)
    log_in_if_asked(page)
    sidebar = page.locator("#det-jupyter-sidebar")
    sync_api.expect(sidebar.locator(f'tr[data-experiment-id="{long_experiment}"]')).to_have_count(1)
    sync_api.expect(sidebar.locator(f'tr[data-task-id="{queued_notebook}"]')).to_have_count(1)
    yield page
    page.close()


def set_sidebar_width(page: Any, width: int) -> float:
    """Drag the handle between the left panel and the main area so the panel is `width` px
    wide, as a user would; returns the width it got."""
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    left = page.locator("#jp-left-stack").bounding_box()
    assert box is not None and left is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(left["x"] + width + box["width"] / 2, y, steps=8)
    page.mouse.up()
    # The split panel lays out on a later animation frame (later still on a loaded machine):
    # wait until the width has settled on the target, for 5 s at most.
    sidebar = page.locator("#det-jupyter-sidebar")
    last = -1.0
    for _ in range(50):
        page.wait_for_timeout(100)
        got = float(sidebar.bounding_box()["width"])
        if abs(got - last) < 0.5 and abs(got - width) <= 4:
            break
        last = got
    return got


@pytest.mark.parametrize("width", WIDTHS)
def test_rows_fit_the_panel_at_any_width(page: Any, width: int, long_experiment: int,
                                         queued_notebook: str,
                                         screenshot: Callable[[Any, str], Path]) -> None:
    got = set_sidebar_width(page, width)
    assert abs(got - width) <= 4, f"the panel is {got}px wide, not {width}px"
    sidebar = page.locator("#det-jupyter-sidebar")
    row = sidebar.locator(f'tr[data-experiment-id="{long_experiment}"]')
    button = row.locator("button.det-Sidebar-open")
    sync_api.expect(button).to_be_visible()
    geometry = page.evaluate(GEOMETRY_JS, sidebar.element_handle())
    assert geometry["visible"] > 10, geometry
    assert geometry["out"] == [], f"at {width}px: " + "\n".join(geometry["out"])
    # The name: one line, cut with an ellipsis, whole in its tooltip.
    for name, full in ((row.locator(".det-Sidebar-name"), LONG_NAME),
                       (sidebar.locator(f'tr[data-task-id="{queued_notebook}"] .det-Sidebar-name'),
                        LONG_DESCRIPTION)):
        # The sidebar redraws its rows as it polls: measure a row that is on the page now (one
        # replaced between finding and measuring it is detached: no layout, no style; again).
        for _ in range(20):
            sync_api.expect(name).to_be_visible()
            cut = name.evaluate("""el => ({scroll: el.scrollWidth, client: el.clientWidth,
                                            connected: el.isConnected,
                                            overflow: getComputedStyle(el).textOverflow,
                                            height: el.getBoundingClientRect().height,
                                            line: parseFloat(getComputedStyle(el).lineHeight) ||
                                                  1.5 * parseFloat(getComputedStyle(el).fontSize)})""")
            if cut["connected"]:
                break
            page.wait_for_timeout(100)
        assert cut["connected"], f"the row was redrawn 20 times in a row: {cut}"
        assert cut["scroll"] > cut["client"] > 0, cut
        assert cut["overflow"] == "ellipsis", cut
        assert cut["height"] <= cut["line"] + 1, f"the name wraps: {cut}"
        # (a notebook's tooltip adds its id on a second line)
        assert (name.get_attribute("title") or "").split("\n")[0] == full
        assert name.inner_text() == full
    # The Open button is whole: its text is not cut either.
    assert button.evaluate("b => b.scrollWidth <= b.clientWidth"), "the Open button's text is cut"
    screenshot(page, f"sidebar-layout-{width}px")


def test_click_on_experiment_row_describes_it(page: Any, long_experiment: int,
                                              screenshot: Callable[[Any, str], Path]) -> None:
    expect = sync_api.expect
    set_sidebar_width(page, 250)
    row = page.locator(f'#det-jupyter-sidebar tr[data-experiment-id="{long_experiment}"]')
    expect(row).to_have_attribute("tabindex", "0")
    expect(row).to_have_attribute("title", f"Describe experiment {long_experiment} in a notebook cell or console")
    assert row.evaluate("tr => getComputedStyle(tr).cursor") == "pointer"
    consoles = page.locator(".jp-ConsolePanel")
    expect(consoles).to_have_count(0)
    # A click on the name, not on the button: no notebook is open, so a new console describes it.
    row.locator(".det-Sidebar-name").click()
    expect(consoles).to_have_count(1)
    expect(consoles.nth(0).locator(".jp-CodeConsole-content")).to_contain_text(
        f"%det e describe {long_experiment}", timeout=60_000)
    screenshot(page, "sidebar-row-click-console")
    # The Open button still works, and opens once (its click is the row's, not a second one).
    row.locator("button.det-Sidebar-open").click()
    expect(consoles).to_have_count(2)
    expect(consoles.nth(1).locator(".jp-CodeConsole-content")).to_contain_text(
        f"%det e describe {long_experiment}", timeout=60_000)
    page.wait_for_timeout(1500)
    expect(consoles).to_have_count(2)


def test_experiment_row_by_keyboard(page: Any, long_experiment: int) -> None:
    expect = sync_api.expect
    sidebar = page.locator("#det-jupyter-sidebar")
    row = sidebar.locator(f'tr[data-experiment-id="{long_experiment}"]')
    row.focus()
    # The panel re-renders every poll: the focused row keeps the focus.
    status = sidebar.locator('[data-det="status"]')
    before = status.inner_text()
    expect(status).not_to_have_text(before, timeout=15_000)
    assert page.evaluate("() => document.activeElement.dataset.experimentId") == str(long_experiment)
    consoles = page.locator(".jp-ConsolePanel")
    count = consoles.count()
    page.keyboard.press("Enter")
    expect(consoles).to_have_count(count + 1)
    expect(consoles.nth(count).locator(".jp-CodeConsole-content")).to_contain_text(
        f"%det e describe {long_experiment}", timeout=60_000)
    row.focus()
    page.keyboard.press(" ")
    expect(consoles).to_have_count(count + 2)


def test_click_on_notebook_row_opens_it(page: Any, queued_notebook: str) -> None:
    row = page.locator(f'#det-jupyter-sidebar tr[data-task-id="{queued_notebook}"]')
    sync_api.expect(row).to_have_attribute("title", f"Open Notebook {queued_notebook} in a new browser tab")
    sync_api.expect(row).to_have_attribute("tabindex", "0")
    # The tab opens at the click (then goes to the proxied notebook, or closes with an error in
    # the panel's status when, as here, the notebook is still queued): the row did what Open does.
    with page.context.expect_page() as info:
        row.locator(".det-Sidebar-name").click()
    info.value.close()
