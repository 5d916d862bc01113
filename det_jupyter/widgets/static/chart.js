// det-jupyter's chart widget (an anywidget module, no build step): line charts in panels,
// each with its own axes, parallel coordinates, and a contour of two hyperparameters. The whole picture is model state
// (`panels`, `coords`), so a reloaded page or a re-opened notebook draws it again from the
// kernel. Colours of text, axes and grid are JupyterLab's CSS variables, so the charts
// follow the light and dark themes without a redraw. Everything from the kernel is set as
// text (textContent), never parsed as markup.

const SVG = 'http://www.w3.org/2000/svg';
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf'];
// Viridis at five stops, for colouring parallel coordinates by the metric.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const FG = 'var(--jp-ui-font-color1, #222)';
const MUTED = 'var(--jp-ui-font-color2, #666)';
const GRID = 'var(--jp-border-color2, #ddd)';
const AXIS = 'var(--jp-border-color1, #999)';
const FONT = 'var(--jp-ui-font-family, sans-serif)';
const MARGIN = { left: 58, right: 14, top: 10, bottom: 38 };
const MARKERS_UP_TO = 400; // points per series drawn with markers (beyond: lines only)

function el(tag, attrs, parent) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function html(tag, style, parent, text) {
  const node = document.createElement(tag);
  if (style) node.setAttribute('style', style);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

const finite = (v) => typeof v === 'number' && Number.isFinite(v);

/** About `count` round tick values covering [lo, hi] (1, 2, 5 times a power of ten). */
export function niceTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

function logTicks(lo, hi) {
  const ticks = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const t = Math.pow(10, e);
    if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push(t);
  }
  return ticks.length >= 2 ? ticks : [lo, hi];
}

function label(v) {
  if (!finite(v)) return '';
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
  return String(Number(v.toPrecision(4)));
}

/** A linear or log scale from a data range to pixels; `ok(v)`: whether v can be drawn. */
function scale(lo, hi, from, to, log) {
  if (log) {
    const a = Math.log10(lo), b = Math.log10(hi);
    const span = b - a || 1;
    return { at: (v) => from + (Math.log10(v) - a) / span * (to - from), ok: (v) => finite(v) && v > 0,
      ticks: () => logTicks(lo, hi) };
  }
  const span = hi - lo || 1;
  return { at: (v) => from + (v - lo) / span * (to - from), ok: finite, ticks: (n) => niceTicks(lo, hi, n) };
}

function range(values, log) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (finite(v) && (!log || v > 0)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  }
  if (lo === Infinity) return null;
  if (lo === hi) {
    if (log) return [lo / 2, hi * 2];
    const pad = Math.abs(lo) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }
  if (!log) { const pad = (hi - lo) * 0.04; return [lo - pad, hi + pad]; }
  return [lo, hi];
}

function drawLines(box, panel, width, height, state) {
  box.textContent = '';
  const series = (panel.series || []).filter((s) => (s.y || []).some(finite));
  const svg = el('svg', { width, height, class: 'det-chart-svg', role: 'img' }, box);
  svg.style.display = 'block';
  svg.style.fontFamily = FONT;
  const innerW = Math.max(40, width - MARGIN.left - MARGIN.right);
  const innerH = Math.max(40, height - MARGIN.top - MARGIN.bottom);
  const x0 = MARGIN.left, y0 = MARGIN.top, x1 = x0 + innerW, y1 = y0 + innerH;
  const xs = [], ys = [];
  for (const s of series) { xs.push(...s.x); ys.push(...s.y); }
  const log = state.log && ys.some((v) => finite(v) && v > 0);
  const xr = range(xs, false), yr = range(ys, log);
  el('rect', { x: x0, y: y0, width: innerW, height: innerH, fill: 'none', style: `stroke:${AXIS}` }, svg);
  box.dataset.series = String(series.length);
  box.dataset.points = '0';
  if (!series.length || !xr || !yr) {
    const t = el('text', { x: x0 + innerW / 2, y: y0 + innerH / 2, 'text-anchor': 'middle',
      class: 'det-chart-empty', style: `fill:${MUTED};font-size:13px` }, svg);
    t.textContent = panel.empty || 'no data yet';
    return;
  }
  const sx = scale(xr[0], xr[1], x0, x1, false), sy = scale(yr[0], yr[1], y1, y0, log);
  for (const t of sx.ticks(Math.max(2, Math.floor(innerW / 80)))) {
    const px = sx.at(t);
    el('line', { x1: px, x2: px, y1: y0, y2: y1, style: `stroke:${GRID}` }, svg);
    const lt = el('text', { x: px, y: y1 + 14, 'text-anchor': 'middle', style: `fill:${MUTED};font-size:11px` }, svg);
    lt.textContent = label(t);
  }
  for (const t of sy.ticks(Math.max(2, Math.floor(innerH / 40)))) {
    const py = sy.at(t);
    el('line', { x1: x0, x2: x1, y1: py, y2: py, style: `stroke:${GRID}` }, svg);
    const lt = el('text', { x: x0 - 6, y: py + 4, 'text-anchor': 'end', style: `fill:${MUTED};font-size:11px` }, svg);
    lt.textContent = label(t);
  }
  const xt = el('text', { x: x0 + innerW / 2, y: height - 6, 'text-anchor': 'middle',
    style: `fill:${FG};font-size:12px` }, svg);
  xt.textContent = panel.xlabel || '';
  const yt = el('text', { x: 12, y: y0 + innerH / 2, 'text-anchor': 'middle',
    transform: `rotate(-90 12 ${y0 + innerH / 2})`, style: `fill:${FG};font-size:12px` }, svg);
  yt.textContent = panel.ylabel || '';
  let drawn = 0;
  const hits = [];
  series.forEach((s, i) => {
    const color = PALETTE[(s.color ?? i) % PALETTE.length];
    let d = '', pen = false;
    const pts = [];
    for (let k = 0; k < s.x.length; k++) {
      const x = s.x[k], y = s.y[k];
      if (!finite(x) || !sy.ok(y)) { pen = false; continue; }
      const px = sx.at(x), py = sy.at(y);
      d += (pen ? 'L' : 'M') + px.toFixed(1) + ' ' + py.toFixed(1);
      pen = true;
      pts.push([px, py]);
      hits.push([px, py, s.name, x, y]);
    }
    drawn += pts.length;
    const mode = s.mode || 'lines';
    if (mode.includes('lines') && d) {
      const p = el('path', { d, fill: 'none', class: 'det-chart-line', 'stroke-width': 1.6,
        stroke: color }, svg);
      el('title', {}, p).textContent = s.name;
    }
    if ((mode.includes('markers') || pts.length === 1) && pts.length <= MARKERS_UP_TO) {
      for (const [px, py] of pts) {
        el('circle', { cx: px, cy: py, r: 2.6, fill: color, class: 'det-chart-marker' }, svg);
      }
    }
  });
  box.dataset.points = String(drawn);
  // Hover: the nearest point, named, in a tooltip.
  const tip = html('div', 'position:absolute;pointer-events:none;display:none;padding:2px 6px;'
    + 'font-size:11px;border-radius:3px;white-space:nowrap;background:var(--jp-layout-color2,#eee);'
    + `color:${FG};border:1px solid var(--jp-border-color1,#999)`, box);
  svg.addEventListener('mousemove', (ev) => {
    const r = svg.getBoundingClientRect();
    const mx = ev.clientX - r.left, my = ev.clientY - r.top;
    let best = null, bestD = 400;
    for (const h of hits) {
      const dd = (h[0] - mx) ** 2 + (h[1] - my) ** 2;
      if (dd < bestD) { bestD = dd; best = h; }
    }
    if (!best) { tip.style.display = 'none'; return; }
    tip.textContent = `${best[2]}: ${label(best[3])}, ${label(best[4])}`;
    tip.style.left = `${Math.min(best[0] + 8, width - 120)}px`;
    tip.style.top = `${best[1] + 8}px`;
    tip.style.display = 'block';
  });
  svg.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
}

function viridis(t) {
  const f = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(f)), w = f - i;
  const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * w));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function drawCoords(box, coords, width, height) {
  box.textContent = '';
  const dims = coords.dimensions || [];
  const ids = coords.trial_ids || [];
  const svg = el('svg', { width, height, class: 'det-chart-svg', role: 'img' }, box);
  svg.style.display = 'block';
  svg.style.fontFamily = FONT;
  box.dataset.series = String(ids.length);
  box.dataset.axes = String(dims.length);
  if (!dims.length || !ids.length) {
    const t = el('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'det-chart-empty',
      style: `fill:${MUTED};font-size:13px` }, svg);
    t.textContent = coords.empty || 'no hyperparameters vary yet';
    return;
  }
  // Room at both ends for an end axis' centred title and its tick labels.
  const top = 34, bottom = height - 24, left = 70, right = width - 70;
  const gap = dims.length > 1 ? (right - left) / (dims.length - 1) : 0;
  const axes = dims.map((d, j) => {
    const x = dims.length > 1 ? left + j * gap : (left + right) / 2;
    const cat = Array.isArray(d.ticktext);
    const vals = d.values.filter(finite);
    // Log axes where a numeric hyperparameter spans more than two decades, all positive.
    const log = !cat && vals.length > 1 && vals.every((v) => v > 0)
      && Math.max(...vals) / Math.min(...vals) >= 100;
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (!vals.length) { lo = 0; hi = 1; }
    if (cat) { lo = -0.5; hi = d.ticktext.length - 0.5; }
    if (lo === hi) { lo = log ? lo / 2 : lo - 1; hi = log ? hi * 2 : hi + 1; }
    const s = scale(lo, hi, bottom, top, log);
    el('line', { x1: x, x2: x, y1: top, y2: bottom, style: `stroke:${AXIS}`, 'stroke-width': 1.5 }, svg);
    const title = el('text', { x, y: 14, 'text-anchor': 'middle', class: 'det-chart-axis-title',
      style: `fill:${FG};font-size:12px` }, svg);
    title.textContent = d.label + (log ? ' (log)' : '');
    const ticks = cat ? d.ticktext.map((_, i) => i) : (log ? s.ticks() : s.ticks(4));
    ticks.forEach((t) => {
      const tx = el('text', { x: x - 4, y: s.at(t) + 4, 'text-anchor': 'end',
        style: `fill:${MUTED};font-size:10px` }, svg);
      tx.textContent = cat ? d.ticktext[t] : label(t);
    });
    return { x, s, d };
  });
  const color = coords.color || [];
  const known = color.filter(finite);
  const cLo = Math.min(...known), cHi = Math.max(...known);
  ids.forEach((id, i) => {
    let d = '', pen = false;
    for (const a of axes) {
      const v = a.d.values[i];
      if (!a.s.ok(v)) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + a.x.toFixed(1) + ' ' + a.s.at(v).toFixed(1);
      pen = true;
    }
    if (!d) return;
    const c = color[i];
    const stroke = finite(c) ? (cHi > cLo ? viridis((c - cLo) / (cHi - cLo)) : viridis(0.5)) : '#999';
    const p = el('path', { d, fill: 'none', stroke, 'stroke-width': 1.5, 'stroke-opacity': 0.8,
      class: 'det-chart-line' }, svg);
    el('title', {}, p).textContent = `trial ${id}` + (finite(c) ? `: ${coords.colorLabel || 'metric'} ${label(c)}` : '');
  });
  if (known.length > 1 && cHi > cLo) {
    const legend = el('text', { x: right, y: height - 6, 'text-anchor': 'end', style: `fill:${MUTED};font-size:11px` }, svg);
    legend.textContent = `colour: ${coords.colorLabel || 'metric'} ${label(cLo)} (purple) … ${label(cHi)} (yellow)`;
  }
}

/**
 * Two hyperparameters against each other, the metric as colour: each trial a dot, and behind
 * them the metric interpolated over the plane (inverse-distance weighting on a grid, in the
 * axes' scaled coordinates), so regions of good and bad values show as in a contour plot.
 */
function drawContour(box, c, width, height) {
  box.textContent = '';
  const svg = el('svg', { width, height, class: 'det-chart-svg', role: 'img' }, box);
  svg.style.display = 'block';
  svg.style.fontFamily = FONT;
  const pts = [];
  (c.x || []).forEach((x, i) => {
    const y = (c.y || [])[i], z = (c.z || [])[i];
    if (finite(x) && finite(y) && finite(z)) pts.push([x, y, z, (c.trial_ids || [])[i]]);
  });
  box.dataset.series = String(pts.length);
  const x0 = MARGIN.left, y0 = MARGIN.top;
  const innerW = Math.max(40, width - MARGIN.left - MARGIN.right - 60), innerH = Math.max(40, height - MARGIN.top - MARGIN.bottom);
  const x1 = x0 + innerW, y1 = y0 + innerH;
  el('rect', { x: x0, y: y0, width: innerW, height: innerH, fill: 'none', style: `stroke:${AXIS}` }, svg);
  if (pts.length < 2) {
    const t = el('text', { x: x0 + innerW / 2, y: y0 + innerH / 2, 'text-anchor': 'middle', class: 'det-chart-empty',
      style: `fill:${MUTED};font-size:13px` }, svg);
    t.textContent = c.empty || 'needs two trials with a metric';
    return;
  }
  const logOf = (vals) => vals.every((v) => v > 0) && Math.max(...vals) / Math.min(...vals) >= 100;
  const lx = logOf(pts.map((p) => p[0])), ly = logOf(pts.map((p) => p[1]));
  const xr = range(pts.map((p) => p[0]), lx), yr = range(pts.map((p) => p[1]), ly);
  const sx = scale(xr[0], xr[1], x0, x1, lx), sy = scale(yr[0], yr[1], y1, y0, ly);
  const zs = pts.map((p) => p[2]);
  const zLo = Math.min(...zs), zHi = Math.max(...zs);
  const tone = (z) => viridis(zHi > zLo ? (z - zLo) / (zHi - zLo) : 0.5);
  const px = pts.map((p) => [sx.at(p[0]), sy.at(p[1]), p[2], p[3], p[0], p[1]]);
  const cell = 12;
  for (let gx = x0; gx < x1; gx += cell) {
    for (let gy = y0; gy < y1; gy += cell) {
      const cx = gx + cell / 2, cy = gy + cell / 2;
      let wsum = 0, zsum = 0;
      for (const p of px) {
        const w = 1 / (((p[0] - cx) ** 2 + (p[1] - cy) ** 2) + 1) ** 1.5;
        wsum += w; zsum += w * p[2];
      }
      el('rect', { x: gx, y: gy, width: Math.min(cell, x1 - gx), height: Math.min(cell, y1 - gy),
        fill: tone(zsum / wsum), 'fill-opacity': 0.55, class: 'det-chart-cell' }, svg);
    }
  }
  for (const t of (lx ? sx.ticks() : sx.ticks(Math.max(2, Math.floor(innerW / 80))))) {
    const lt = el('text', { x: sx.at(t), y: y1 + 14, 'text-anchor': 'middle', style: `fill:${MUTED};font-size:11px` }, svg);
    lt.textContent = label(t);
  }
  for (const t of (ly ? sy.ticks() : sy.ticks(Math.max(2, Math.floor(innerH / 40))))) {
    const lt = el('text', { x: x0 - 6, y: sy.at(t) + 4, 'text-anchor': 'end', style: `fill:${MUTED};font-size:11px` }, svg);
    lt.textContent = label(t);
  }
  const xt = el('text', { x: x0 + innerW / 2, y: height - 6, 'text-anchor': 'middle', style: `fill:${FG};font-size:12px` }, svg);
  xt.textContent = (c.xlabel || '') + (lx ? ' (log)' : '');
  const yt = el('text', { x: 12, y: y0 + innerH / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${y0 + innerH / 2})`,
    style: `fill:${FG};font-size:12px` }, svg);
  yt.textContent = (c.ylabel || '') + (ly ? ' (log)' : '');
  for (const p of px) {
    const dot = el('circle', { cx: p[0], cy: p[1], r: 4, fill: tone(p[2]), stroke: FG, 'stroke-width': 1,
      class: 'det-chart-marker' }, svg);
    el('title', {}, dot).textContent = `trial ${p[3]}: ${label(p[4])}, ${label(p[5])} → ${c.zlabel || 'metric'} ${label(p[2])}`;
  }
  // The colour scale's ends (the metric's name is in the title).
  [[zHi, y0 + 10], [zLo, y1]].forEach(([z, y]) => {
    el('rect', { x: x1 + 8, y: y - 10, width: 10, height: 10, fill: tone(z) }, svg);
    const t = el('text', { x: x1 + 22, y, style: `fill:${MUTED};font-size:11px` }, svg);
    t.textContent = label(z);
  });
}

function render({ model, el: root }) {
  root.classList.add('det-chart');
  root.style.width = '100%';
  const state = { log: {} };
  const draw = () => {
    root.textContent = '';
    const width = Math.max(280, root.clientWidth || 640);
    const height = model.get('height') || 260;
    const kind = model.get('kind');
    if (kind === 'contour' || kind === 'parcoords') {
      // One titled panel drawn from `coords`.
      const coords = model.get('coords') || {};
      const panel = html('div', 'position:relative', root);
      panel.className = 'det-chart-panel';
      panel.dataset.title = coords.title || '';
      html('div', `color:${FG};font-weight:600;font-size:13px;margin:2px 0`, panel, coords.title || '');
      const box = html('div', 'position:relative', panel);
      box.className = 'det-chart-box';
      if (kind === 'contour') drawContour(box, coords, Math.min(width, 720), height);
      else drawCoords(box, coords, width, height);
      return;
    }
    const panels = model.get('panels') || [];
    const grid = html('div', 'display:flex;flex-wrap:wrap;gap:8px 16px;width:100%', root);
    // Two panels side by side where there is room, else one per row.
    const perRow = panels.length > 1 && width >= 700 ? 2 : 1;
    const panelW = Math.floor((width - (perRow - 1) * 16) / perRow) - 2;
    for (const p of panels) {
      const panel = html('div', `position:relative;width:${panelW}px;min-width:0`, grid);
      panel.className = 'det-chart-panel';
      panel.dataset.title = p.title || '';
      const head = html('div', 'display:flex;align-items:center;gap:8px;margin:2px 0', panel);
      html('span', `color:${FG};font-weight:600;font-size:13px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap`,
        head, p.title || '').title = p.title || '';
      const toggle = html('label', `color:${MUTED};font-size:11px;margin-left:auto;white-space:nowrap`, head);
      const box = html('div', 'position:relative', panel);
      box.className = 'det-chart-box';
      const check = html('input', '', toggle);
      check.type = 'checkbox';
      check.className = 'det-chart-log';
      check.checked = !!state.log[p.title];
      toggle.appendChild(document.createTextNode(' log y'));
      const paint = () => drawLines(box, p, panelW, height, { log: !!state.log[p.title] });
      check.addEventListener('change', () => { state.log[p.title] = check.checked; paint(); });
      paint();
      const legend = (p.series || []).filter((s) => (s.y || []).some(finite));
      if (legend.length > 1) {
        const keys = html('div', `display:flex;flex-wrap:wrap;gap:2px 10px;max-height:54px;overflow:auto;font-size:11px;color:${FG}`, panel);
        legend.forEach((s, i) => {
          const item = html('span', 'white-space:nowrap', keys);
          html('span', `display:inline-block;width:10px;height:3px;vertical-align:middle;margin-right:4px;background:${PALETTE[(s.color ?? i) % PALETTE.length]}`, item);
          item.appendChild(document.createTextNode(s.name));
        });
      }
    }
  };
  let lastWidth = -1;
  const observer = new ResizeObserver(() => {
    const w = root.clientWidth;
    if (w && Math.abs(w - lastWidth) > 4) { lastWidth = w; draw(); }
  });
  observer.observe(root);
  model.on('change:panels', draw);
  model.on('change:coords', draw);
  model.on('change:kind', draw);
  model.on('change:height', draw);
  draw();
  return () => observer.disconnect();
}

export default { render };
