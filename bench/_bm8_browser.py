"""BM-8's measurements in headless Chromium: each returns milliseconds on the page's own clock
(``performance.now()``), from the user's action (a pointer press on a link or button, or the
navigation itself for the static floor) to the first animation frame in which the chart's
lines are in the DOM, with the data request's span on the same clock where there is one.

"Drawn" is tested once per animation frame (``requestAnimationFrame``), so every figure is
late by at most one frame (about 16 ms), equally on every side.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

# Started before the action: records the first frame in which ``sel`` matches >= n elements.
WATCH_JS = """([sel, n]) => {
  window.__bm8 = {t0: null, drawn: null};
  document.addEventListener('pointerdown', () => { if (window.__bm8.t0 === null) window.__bm8.t0 = performance.now(); },
                            {capture: true, once: true});
  performance.clearResourceTimings();
  performance.setResourceTimingBufferSize(100000);
  const check = () => {
    if (document.querySelectorAll(sel).length >= n) { window.__bm8.drawn = performance.now(); return; }
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
}"""

# The same, for a page navigated to: installed before its first script runs; t0 = 0 is the
# navigation's start (the document's time origin).
FLOOR_INIT_JS = """(() => {
  window.__bm8 = {t0: 0, drawn: null};
  const check = () => {
    if (document.querySelectorAll(%r).length >= %d) { window.__bm8.drawn = performance.now(); return; }
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();"""

REQUESTS_JS = """(part) => performance.getEntriesByType('resource').filter(e => e.name.includes(part))
  .map(e => [e.startTime, e.responseEnd, e.transferSize || e.encodedBodySize || 0])"""

FLOOR_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>BM-8 floor</title></head>
<body style="margin:0;font-family:sans-serif">
<div id="chart" style="width:1100px"></div>
<script type="module">
// The floor: the dashboard's own plotting module fed the panel the experiment page draws
// (labextension/src/charts.ts's StaticModel, reduced to what chart.js reads).
import chart from './chart.js';
const data = new URLSearchParams(location.search).get('data');
const panel = await (await fetch(`./${data}.json`)).json();
const values = {kind: 'lines', height: 340, panels: [panel], coords: {}};
chart.render({model: {get: (name) => values[name], on: () => {}}, el: document.getElementById('chart')});
</script>
</body></html>
"""


def write_floor(site: Path, chart_js: Path) -> None:
    """The static site: index.html and a copy of chart.js (the panels' JSON go beside them)."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(chart_js, site / "chart.js")
    (site / "index.html").write_text(FLOOR_HTML)


def _finish(page: Any, timeout_ms: float, request_part: str | None,
            also: dict[str, str] | None = None) -> dict[str, Any]:
    page.wait_for_function("() => window.__bm8 && window.__bm8.drawn !== null", polling=50, timeout=timeout_ms)
    t0, drawn = page.evaluate("() => [window.__bm8.t0, window.__bm8.drawn]")
    out: dict[str, Any] = {"ms": drawn - t0}
    if request_part:
        # Only those sent after the action (a poll already in flight is not the action's).
        reqs = [r for r in page.evaluate(REQUESTS_JS, request_part) if r[0] >= t0]
        if reqs:
            # The data request(s): from the action to the first sent, to the last answered.
            out["request_start_ms"] = min(r[0] for r in reqs) - t0
            out["response_end_ms"] = max(r[1] for r in reqs) - t0
            out["request_ms"] = sum(r[1] - r[0] for r in reqs)
            out["response_bytes"] = sum(r[2] for r in reqs)
    for name, part in (also or {}).items():
        # Other requests the action made: when the last of them was answered.
        reqs = [r for r in page.evaluate(REQUESTS_JS, part) if r[0] >= t0]
        if reqs:
            out[f"{name}_end_ms"] = max(r[1] for r in reqs) - t0
    return out


def click_and_time(page: Any, target: Any, sel: str, n: int, *, timeout_ms: float = 120_000,
                   request_part: str | None = None, also: dict[str, str] | None = None) -> dict[str, Any]:
    """Press ``target`` (a locator) and time until ``sel`` matches ``n`` elements."""
    target.wait_for(state="visible")
    page.evaluate(WATCH_JS, [sel, n])
    target.click()
    return _finish(page, timeout_ms, request_part, also)


def navigate_and_time(browser: Any, url: str, sel: str, n: int, *, timeout_ms: float = 120_000,
                      request_part: str | None = None) -> dict[str, Any]:
    """Open ``url`` in a fresh context (empty cache) and time from navigation until ``sel``
    matches ``n`` elements."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
    try:
        page = ctx.new_page()
        page.add_init_script(FLOOR_INIT_JS % (sel, n))
        page.goto(url, wait_until="commit")
        return _finish(page, timeout_ms, request_part)
    finally:
        ctx.close()
