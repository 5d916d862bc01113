/**
 * One experiment: state and actions, why failed trials crashed, learning curves of all its
 * trials (downsampled by the master: `GET /api/v1/trials/time-series`) with a metric, an x
 * axis (batches or time), smoothing and a log toggle, hyperparameter views (parallel
 * coordinates, a slice per hyperparameter, importance), an `adaptive_asha` search's rungs (which
 * trials reached, stopped at or run on from each: the master's `GET /api/v1/experiments/{id}/
 * asha-rungs`, the notebook widget's table), and its trials, which can be chosen to compare
 * their curves and clicked through.
 */

import { DetApi } from './api';
import { Chart, ICoords, IContour, IPanel, smooth } from './charts';
import { IColumn, INavigator, DashPanel, button, flatten, h, hpText, metricNames, num, select, state, table, TERMINAL, trialSeries } from './dash_common';
import { launchTask } from './dash_experiments';
import { crashReason, trialLogs } from './dash_trial';


export class ExperimentPanel extends DashPanel {
  constructor(api: DetApi, nav: INavigator, readonly experimentId: number) {
    super(api, nav, 4000);
    this.id = `det-dash-experiment-${experimentId}`;
    this.title.label = `det: experiment ${experimentId}`;
    this.addClass('det-Dash-experiment');
    this._header = h('div', { className: 'det-Dash-header' });
    this._crashes = h('div', { className: 'det-Dash-crashes' });
    this._controls = h('div', { className: 'det-Dash-toolbar' });
    const curves = h('div', { className: 'det-Dash-chart', 'data-det': 'curves' });
    const coords = h('div', { className: 'det-Dash-chart', 'data-det': 'coords' });
    const slices = h('div', { className: 'det-Dash-chart', 'data-det': 'slices' });
    const contour = h('div', { className: 'det-Dash-chart', 'data-det': 'contour' });
    this._contourControls = h('div', { className: 'det-Dash-toolbar' });
    this._importance = h('div', { className: 'det-Dash-importance', 'data-det': 'importance' });
    this._trials = h('div', { className: 'det-Dash-scroll' });
    this._rungs = h('div', { className: 'det-Dash-scroll det-Dash-rungs', 'data-det': 'rungs' });
    const moduleUrl = api.url('det-jupyter/chart.js');
    this._curves = new Chart(curves, moduleUrl, 'lines', 340);
    this._coords = new Chart(coords, moduleUrl, 'parcoords', 300);
    this._slices = new Chart(slices, moduleUrl, 'lines', 220);
    this._contour = new Chart(contour, moduleUrl, 'contour', 320);
    this.body.append(this._header, this._crashes, this._controls, curves,
      h('h3', {}, 'Hyperparameters'), coords, this._importance, this._contourControls, contour, slices,
      this._rungs, h('h3', {}, 'Trials'), this._trials);
  }

  protected async load(): Promise<any> {
    const [expBody, trialsBody] = await Promise.all([
      this.api.get(`api/v1/experiments/${this.experimentId}`),
      this.api.get(`api/v1/experiments/${this.experimentId}/trials?limit=1000`)
    ]);
    const exp = expBody.experiment;
    const trials: any[] = trialsBody.trials ?? [];
    const names = metricNames(trials);
    if (!this._metric || !names.includes(this._metric)) {
      const searcherMetric = `validation.${exp.config?.searcher?.metric ?? ''}`;
      this._metric = names.includes(searcherMetric) ? searcherMetric : names.includes('training.loss') ? 'training.loss' : names[0] ?? '';
    }
    // The rungs (ASHA only) come while the curves load.
    const rungsReply = exp.config?.searcher?.name === 'adaptive_asha'
      ? this.api.getOptional(`api/v1/experiments/${this.experimentId}/asha-rungs`) : Promise.resolve(null);
    const series = this._metric ? await trialSeries(this.api, trials, this._metric) : new Map();
    const rungs: any[] = (await rungsReply)?.rungs ?? [];
    for (const t of trials) {
      if (t.state === 'STATE_ERROR' && !this._crashReasons.has(t.id)) {
        this._crashReasons.set(t.id, crashReason(await trialLogs(this.api, t.id, 80)));
      }
    }
    return { exp, trials, names, series, rungs };
  }

  protected live(data: any): boolean {
    return !TERMINAL.has(data.exp.state);
  }

  protected render(data: any): void {
    const { exp, trials, names, series, rungs } = data;
    this._data = data;
    const searcher = exp.config?.searcher ?? {};
    const smaller = searcher.smaller_is_better !== false;
    const scored = trials.filter((t: any) => typeof t.searcherMetricValue === 'number');
    scored.sort((a: any, b: any) => (smaller ? 1 : -1) * (a.searcherMetricValue - b.searcherMetricValue) || a.id - b.id);
    const best = scored[0];
    const canPause = ['STATE_ACTIVE', 'STATE_RUNNING', 'STATE_QUEUED'].includes(exp.state);
    this._header.replaceChildren(
      h('h2', {}, `Experiment ${exp.id}: ${exp.name ?? ''}`),
      h('div', {},
        h('b', { 'data-det': 'state' }, state(exp.state)),
        ` · ${trials.length} trial(s) · ${searcher.name ?? ''} searcher on ${searcher.metric ?? ''}`,
        best ? ` · best: trial ${best.id}, ${num(best.searcherMetricValue)}` : ' · no validation yet'),
      h('div', { className: 'det-Dash-actions' },
        button('Pause', () => void this._verb('pause'), { disabled: !canPause }),
        button('Activate', () => void this._verb('activate'), { disabled: exp.state !== 'STATE_PAUSED' }),
        button('Kill', () => this.ask(`Kill experiment ${exp.id}? Its running trials stop now, without a checkpoint.`,
          'Yes, kill', () => this._verb('kill')), { disabled: TERMINAL.has(exp.state), 'data-det': 'kill' }),
        button('TensorBoard', () => void launchTask(this.api, 'tensorboard', { experimentIds: [exp.id] })
          .catch(err => this.setStatus(`cannot start a TensorBoard: ${err.message ?? err}`, true)))
      ));
    const crashed = trials.filter((t: any) => t.state === 'STATE_ERROR');
    this._crashes.replaceChildren(...crashed.slice(0, 5).map((t: any) => h('div', { className: 'det-mod-error' },
      `trial ${t.id} failed: ${this._crashReasons.get(t.id) ?? 'no traceback in its log'}`)));
    this._renderControls(names);
    this._renderRungs(rungs, searcher);
    // The curves first; the hyperparameter views and the trials table once they are drawn.
    void this._drawCurves(series, trials).then(() => window.requestAnimationFrame(() => {
      void this._coords.setCoords(coordinates(trials, searcher.metric ?? 'metric'));
      this._renderHpViews(trials, searcher.metric ?? 'metric');
      this._renderTrials(trials, searcher);
    }));
  }

  /** The ASHA rungs table (nothing for other searchers). */
  private _renderRungs(rungs: any[], searcher: any): void {
    if (!rungs.length) {
      this._rungs.replaceChildren();
      return;
    }
    const ids = (list: number[]): string => (list ?? []).join(', ');
    const columns: IColumn<any>[] = [
      { key: 'rung', label: 'Rung', cell: r => String(r.rung), numeric: true },
      { key: 'units', label: String(rungs[0].timeMetric ?? 'batches'), cell: r => String(r.units), numeric: true },
      { key: 'reached', label: 'Reached', cell: r => ids(r.reached) },
      { key: 'stopped', label: 'Stopped here', cell: r => ids(r.stopped) },
      { key: 'running', label: 'Running', cell: r => ids(r.running) },
      { key: 'best', label: `Best ${searcher.metric ?? ''}`.trim(), cell: r => num(r.best), numeric: true }
    ];
    this._rungs.replaceChildren(h('h3', {}, 'ASHA rungs'),
      table(columns, rungs, undefined, r => String(r.rung)));
  }

  private _renderTrials(trials: any[], searcher: any): void {
    const columns: IColumn<any>[] = [
      {
        key: 'pick', label: 'compare', cell: t => {
          const box = h('input', { type: 'checkbox', 'data-trial': t.id });
          box.checked = this._picked.has(t.id);
          box.addEventListener('change', () => {
            box.checked ? this._picked.add(t.id) : this._picked.delete(t.id);
            void this._drawCurves(this._data.series, this._data.trials);
          });
          return box;
        }
      },
      { key: 'id', label: 'Trial', cell: t => String(t.id), numeric: true },
      { key: 'state', label: 'State', cell: t => state(t.state) },
      { key: 'batches', label: 'Batches', cell: t => String(t.totalBatchesProcessed ?? 0), numeric: true },
      { key: 'metric', label: searcher.metric ?? 'metric', cell: t => num(t.searcherMetricValue), numeric: true },
      { key: 'restarts', label: 'Restarts', cell: t => String(t.restarts ?? 0), numeric: true },
      { key: 'hparams', label: 'Hyperparameters', cell: t => Object.entries(flatten(t.hparams ?? {})).map(([k, v]) => `${k}=${hpText(v)}`).join(' ') }
    ];
    this._trials.replaceChildren(table(columns, trials, t => this.nav.trial(Number(t.id)), t => String(t.id)));
  }

  private _renderControls(names: string[]): void {
    if (this._controls.dataset.names === names.join('\n') && this._controls.childElementCount) {
      return;
    }
    this._controls.dataset.names = names.join('\n');
    const slider = h('input', { type: 'range', min: 0, max: 0.99, step: 0.01, value: this._smoothing, 'data-det': 'smoothing' });
    slider.addEventListener('input', () => {
      this._smoothing = Number(slider.value);
      void this._drawCurves(this._data.series, this._data.trials);
    });
    this._controls.replaceChildren(
      h('label', {}, 'metric ', select(names.map(n => [n, n]), this._metric, v => {
        this._metric = v;
        void this.refresh();
      }, { 'data-det': 'metric' })),
      h('label', {}, 'x ', select([['batches', 'batches'], ['time', 'time (s)'], ['epoch', 'epochs']], this._x, v => {
        this._x = v;
        void this._drawCurves(this._data.series, this._data.trials);
      }, { 'data-det': 'x' })),
      h('label', {}, 'smoothing ', slider)
    );
  }

  private async _drawCurves(series: Map<number, any[]>, trials: any[]): Promise<void> {
    const name = this._metric.split('.').slice(1).join('.');
    const shown = trials.filter(t => !this._picked.size || this._picked.has(t.id));
    const lines = shown.map((t, i) => {
      const points = series.get(t.id) ?? [];
      const t0 = points.length ? Date.parse(points[0].time) : 0;
      const x = points.map(p => this._x === 'time' ? (Date.parse(p.time) - t0) / 1000
        : this._x === 'epoch' ? (typeof p.epoch === 'number' ? p.epoch : null) : p.batches);
      const y = points.map(p => {
        const v = p.values?.[name];
        return typeof v === 'number' && Number.isFinite(v) ? v : null;
      });
      return { name: `trial ${t.id}`, x, y: smooth(y, this._smoothing), mode: 'lines' as const, color: i };
    });
    const panel: IPanel = {
      title: this._metric || 'no metrics yet', xlabel: this._x === 'time' ? 'seconds' : this._x,
      ylabel: name, empty: 'no metrics yet', series: lines
    };
    await this._curves.setPanels([panel]);
  }

  private _renderHpViews(trials: any[], metric: string): void {
    const flat = trials.map(t => flatten(t.hparams ?? {}));
    const names = [...new Set(flat.flatMap(f => Object.keys(f)))].sort()
      .filter(n => new Set(flat.map(f => JSON.stringify(f[n]))).size > 1);
    const y = trials.map(t => typeof t.searcherMetricValue === 'number' ? t.searcherMetricValue : null);
    const panels: IPanel[] = names.map(n => {
      const values = flat.map(f => f[n]);
      const numeric = values.every(v => typeof v === 'number');
      const levels = [...new Set(values.map(hpText))].sort();
      const x = values.map(v => numeric ? v as number : levels.indexOf(hpText(v)));
      return {
        title: `${metric} by ${n}`, xlabel: numeric ? n : `${n}: ${levels.map((l, i) => `${i}=${l}`).join(', ')}`,
        ylabel: metric, empty: 'no validation yet',
        series: [{ name: 'trials', x, y, mode: 'markers' as const, color: 0 }]
      };
    });
    void this._slices.setPanels(panels);
    const rows = names.map(n => ({ name: n, score: importance(flat.map(f => f[n]), y) }))
      .sort((a, b) => (b.score ?? -1) - (a.score ?? -1));
    // The contour: two numeric hyperparameters, by default the two that matter most.
    const numeric = rows.map(r => r.name).filter(n => flat.every(f => typeof f[n] === 'number'));
    if (!numeric.includes(this._cx)) {
      this._cx = numeric[0] ?? '';
    }
    if (!numeric.includes(this._cy) || this._cy === this._cx) {
      this._cy = numeric.find(n => n !== this._cx) ?? '';
    }
    const pick = (value: string, set: (v: string) => void, what: string): HTMLSelectElement =>
      select(numeric.map(n => [n, n]), value, v => {
        set(v);
        this._renderHpViews(this._data.trials, metric);
      }, { 'data-det': what });
    this._contourControls.replaceChildren(h('b', {}, 'Contour '),
      h('label', {}, 'x ', pick(this._cx, v => (this._cx = v), 'contour-x')),
      h('label', {}, 'y ', pick(this._cy, v => (this._cy = v), 'contour-y')));
    const contour: IContour = {
      title: this._cx && this._cy ? `${metric} over ${this._cx} and ${this._cy}` : 'contour',
      xlabel: this._cx, ylabel: this._cy, zlabel: metric,
      x: flat.map(f => (typeof f[this._cx] === 'number' ? (f[this._cx] as number) : null)),
      y: flat.map(f => (typeof f[this._cy] === 'number' ? (f[this._cy] as number) : null)),
      z: y, trial_ids: trials.map(t => Number(t.id)),
      empty: numeric.length < 2 ? 'needs two numeric hyperparameters that vary' : 'needs two trials with a metric'
    };
    void this._contour.setCoords(contour);
    this._importance.replaceChildren(h('h4', {}, `Importance (|Spearman correlation| with ${metric})`),
      ...rows.map(r => h('div', { className: 'det-Dash-bar', 'data-hp': r.name },
        h('span', { className: 'det-Dash-bar-label' }, r.name),
        h('span', { className: 'det-Dash-bar-fill', style: `width:${Math.round((r.score ?? 0) * 100)}%` }),
        h('span', {}, r.score === null ? 'n/a' : num(r.score, 2)))));
  }

  private async _verb(verb: string): Promise<void> {
    await this.api.send('POST', `api/v1/experiments/${this.experimentId}/${verb}`);
    await this.refresh();
  }

  dispose(): void {
    this._curves.dispose();
    this._coords.dispose();
    this._slices.dispose();
    this._contour.dispose();
    super.dispose();
  }

  private _header: HTMLElement;
  private _crashes: HTMLElement;
  private _controls: HTMLElement;
  private _importance: HTMLElement;
  private _trials: HTMLElement;
  private _rungs: HTMLElement;
  private _curves: Chart;
  private _coords: Chart;
  private _slices: Chart;
  private _contour: Chart;
  private _contourControls: HTMLElement;
  private _cx = '';
  private _cy = '';
  private _metric = '';
  private _x = 'batches';
  private _smoothing = 0;
  private _picked = new Set<number>();
  private _crashReasons = new Map<number, string | null>();
  private _data: any = { series: new Map(), trials: [] };
}

/** Parallel coordinates of the varying hyperparameters and the searcher metric. */
export function coordinates(trials: any[], metric: string): ICoords {
  const rows = [...trials].sort((a, b) => a.id - b.id);
  const flat = rows.map(t => flatten(t.hparams ?? {}));
  const names = [...new Set(flat.flatMap(f => Object.keys(f)))].sort();
  const dimensions: ICoords['dimensions'] = [];
  for (const n of names) {
    const values = flat.map(f => f[n]);
    if (new Set(values.map(v => JSON.stringify(v))).size <= 1 && rows.length > 1) {
      continue;
    }
    if (values.every(v => typeof v === 'number')) {
      dimensions.push({ label: n, values: values as number[] });
    } else {
      const levels = [...new Set(values.map(hpText))].sort();
      dimensions.push({ label: n, values: values.map(v => levels.indexOf(hpText(v))), ticktext: levels });
    }
  }
  const color = rows.map(t => typeof t.searcherMetricValue === 'number' ? t.searcherMetricValue : null);
  if (color.some(c => c !== null)) {
    dimensions.push({ label: metric, values: color });
  }
  return { title: 'parallel coordinates', dimensions, trial_ids: rows.map(t => t.id), color, colorLabel: metric };
}

function ranks(values: number[]): number[] {
  const order = values.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]);
  const out = new Array<number>(values.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && order[j + 1][0] === order[i][0]) {
      j++;
    }
    for (let k = i; k <= j; k++) {
      out[order[k][1]] = (i + j) / 2;
    }
    i = j + 1;
  }
  return out;
}

/**
 * How strongly a hyperparameter goes with the metric: |Spearman's rank correlation| over the
 * trials with a metric (categorical values by their sorted order); null with fewer than 3.
 */
export function importance(values: unknown[], metric: (number | null)[]): number | null {
  const pairs = values.map((v, i) => [v, metric[i]] as const).filter(([, m]) => m !== null);
  if (pairs.length < 3) {
    return null;
  }
  const numeric = pairs.every(([v]) => typeof v === 'number');
  const levels = [...new Set(pairs.map(([v]) => hpText(v)))].sort();
  const xs = ranks(pairs.map(([v]) => numeric ? v as number : levels.indexOf(hpText(v))));
  const ys = ranks(pairs.map(([, m]) => m as number));
  const mean = (a: number[]): number => a.reduce((s, v) => s + v, 0) / a.length;
  const mx = mean(xs), my = mean(ys);
  let sxy = 0, sxx = 0, syy = 0;
  for (let i = 0; i < xs.length; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
    syy += (ys[i] - my) ** 2;
  }
  return sxx && syy ? Math.abs(sxy / Math.sqrt(sxx * syy)) : 0;
}
