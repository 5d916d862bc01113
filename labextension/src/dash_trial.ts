/**
 * One trial: a chart per metric (training and validation of that metric on its own axes), a
 * log viewer (search, level and rank filters, follow, download) and its checkpoints with
 * register-as-model-version, download and delete.
 */

import { DetApi } from './api';
import { Chart, IPanel } from './charts';
import { IColumn, INavigator, DashPanel, button, h, metricNames, num, present, select, state, table, when, TERMINAL } from './dash_common';

const LEVELS: [string, string][] = [
  ['', 'any level'], ['LOG_LEVEL_DEBUG', 'debug'], ['LOG_LEVEL_INFO', 'info'], ['LOG_LEVEL_WARNING', 'warning'],
  ['LOG_LEVEL_ERROR', 'error'], ['LOG_LEVEL_CRITICAL', 'critical']
];
const LOG_LINES = 500;

/** The log entries of a streamed reply (one JSON object per line, 0.38.1's `{result: …}`). */
export function parseLogStream(text: string): any[] {
  const out: any[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) {
      continue;
    }
    try {
      const obj = JSON.parse(line);
      out.push(obj.result ?? obj);
    } catch {
      // a partial line: the next read completes it
    }
  }
  return out;
}

/** A trial's last `n` log lines (text), oldest first. */
export async function trialLogs(api: DetApi, trialId: number, n: number): Promise<string[]> {
  const resp = await api.raw(`api/v1/trials/${trialId}/logs?limit=${n}&orderBy=ORDER_BY_DESC`);
  return parseLogStream(await resp.text()).map(e => String(e.message ?? e.log ?? '').replace(/\n$/, '')).reverse();
}

const PREFIX = /^(\[[^\]]*\] ?)+/;

/** The exception line of the last Python traceback in `lines`, else null. */
export function crashReason(lines: string[]): string | null {
  const plain = lines.map(l => l.trimEnd().replace(PREFIX, ''));
  let start = -1;
  plain.forEach((l, i) => {
    if (l.startsWith('Traceback (most recent call last)')) {
      start = i;
    }
  });
  if (start < 0) {
    return null;
  }
  return plain.slice(start + 1).find(l => l && !/^\s/.test(l)) ?? null;
}

export class TrialPanel extends DashPanel {
  constructor(api: DetApi, nav: INavigator, readonly trialId: number) {
    super(api, nav, 3000);
    this.id = `det-dash-trial-${trialId}`;
    this.title.label = `det: trial ${trialId}`;
    this.addClass('det-Dash-trial');
    this._header = h('div', { className: 'det-Dash-header' });
    const charts = h('div', { className: 'det-Dash-chart', 'data-det': 'metrics' });
    this._chart = new Chart(charts, api.url('det-jupyter/chart.js'), 'lines', 220);
    this._search = h('input', { className: 'jp-mod-styled', placeholder: 'search the log', 'data-det': 'log-search' });
    this._search.addEventListener('change', () => void this._loadLogs());
    this._rank = h('input', { className: 'jp-mod-styled', placeholder: 'rank', size: 4, 'data-det': 'log-rank' });
    this._rank.addEventListener('change', () => void this._loadLogs());
    const follow = h('input', { type: 'checkbox', 'data-det': 'log-follow' });
    follow.checked = true;
    follow.addEventListener('change', () => {
      this._follow = follow.checked;
    });
    this._log = h('pre', { className: 'det-Dash-log', 'data-det': 'log' });
    this._checkpoints = h('div', { className: 'det-Dash-scroll' });
    this.body.append(this._header, charts,
      h('h3', {}, 'Logs'),
      h('div', { className: 'det-Dash-toolbar' }, this._search,
        select(LEVELS, '', v => {
          this._level = v;
          void this._loadLogs();
        }, { 'data-det': 'log-level' }),
        this._rank, h('label', {}, follow, ' follow'),
        button('Download', () => void this._download(), { 'data-det': 'log-download' })),
      this._log, h('h3', {}, 'Checkpoints'), this._checkpoints);
  }

  protected async load(): Promise<any> {
    const trial = (await this.api.get(`api/v1/trials/${this.trialId}`)).trial;
    // Every metric the trial reported, six per request (the route's limit), 1,000 points each.
    const groups: Record<string, any[]> = {};
    const names = metricNames([trial]);
    for (let i = 0; i < names.length; i += 6) {
      const q = new URLSearchParams({ trialIds: String(this.trialId), maxDatapoints: '1000' });
      for (const name of names.slice(i, i + 6)) {
        q.append('metricIds', name);
      }
      const body = await this.api.get(`api/v1/trials/time-series?${q}`);
      for (const m of body.trials?.[0]?.metrics ?? []) {
        (groups[m.group] ??= []).push(...(m.data ?? []));
      }
    }
    const checkpoints = (await this.api.get(`api/v1/trials/${this.trialId}/checkpoints`)).checkpoints ?? [];
    const models = (await this.api.getOptional('api/v1/models?limit=200'))?.models ?? [];
    if (this._follow || !this._logLoaded) {
      await this._loadLogs();
    }
    return { trial, groups, checkpoints, models };
  }

  protected live(data: any): boolean {
    return !TERMINAL.has(data.trial.state);
  }

  protected render(data: any): void {
    const { trial, groups, checkpoints, models } = data;
    const reason = trial.state === 'STATE_ERROR' ? crashReason(this._lines.slice(-200)) : null;
    this._header.replaceChildren(...present(
      h('h2', {}, `Trial ${trial.id} of experiment ${trial.experimentId}`),
      h('div', {}, h('b', { 'data-det': 'state' }, state(trial.state)),
        ` · ${trial.totalBatchesProcessed ?? 0} batches · restarts ${trial.restarts ?? 0}`,
        ` · metric ${num(trial.searcherMetricValue)}`),
      button(`Experiment ${trial.experimentId}`, () => this.nav.experiment(Number(trial.experimentId))),
      trial.state === 'STATE_ERROR'
        ? h('div', { className: 'det-mod-error' }, `failed: ${reason ?? 'see the log below'}`) : null));
    void this._chart.setPanels(metricPanels(groups));
    const columns: IColumn<any>[] = [
      { key: 'uuid', label: 'UUID', cell: c => String(c.uuid) },
      { key: 'state', label: 'State', cell: c => state(c.state) },
      { key: 'batches', label: 'Batches', cell: c => String(c.metadata?.steps_completed ?? ''), numeric: true },
      { key: 'metric', label: 'Metric', cell: c => num(c.training?.searcherMetric), numeric: true },
      { key: 'time', label: 'Reported', cell: c => when(c.reportTime) },
      { key: 'actions', label: '', cell: c => this._checkpointActions(c, models) }
    ];
    this._checkpoints.replaceChildren(checkpoints.length
      ? table(columns, checkpoints, undefined, c => String(c.uuid))
      : h('p', { className: 'det-Dash-empty' }, 'No checkpoints.'));
  }

  private _checkpointActions(c: any, models: any[]): HTMLElement {
    const usable = c.state === 'STATE_COMPLETED';
    const model = select([['', 'register as…'], ...models.filter(m => !m.archived).map(m => [String(m.name), String(m.name)] as [string, string])],
      '', name => {
        if (name) {
          void this._register(c.uuid, name);
        }
      }, { 'data-det': 'register', disabled: !usable });
    return h('span', { className: 'det-Dash-actions' }, model,
      button('Download', () => void this._downloadCheckpoint(c.uuid), { disabled: !usable, 'data-det': 'download' }),
      button('Delete', () => this.ask(`Delete checkpoint ${c.uuid}? Its files are removed.`, 'Yes, delete',
        async () => {
          await this.api.send('DELETE', 'api/v1/checkpoints', { checkpointUuids: [c.uuid] });
        }), { disabled: !usable, 'data-det': 'delete' }));
  }

  private async _register(uuid: string, model: string): Promise<void> {
    try {
      const reply = await this.api.send('POST', `api/v1/models/${encodeURIComponent(model)}/versions`,
        { checkpointUuid: uuid, modelName: model });
      this.setStatus(`registered ${uuid} as version ${reply.modelVersion?.version ?? '?'} of ${model}`);
    } catch (err) {
      this.setStatus(`cannot register ${uuid}: ${err instanceof Error ? err.message : String(err)}`, true);
    }
  }

  private async _downloadCheckpoint(uuid: string): Promise<void> {
    try {
      const resp = await this.api.raw(`checkpoints/${encodeURIComponent(uuid)}`, { headers: { Accept: 'application/gzip' } });
      save(await resp.blob(), `${uuid}.tgz`);
    } catch (err) {
      this.setStatus(`cannot download ${uuid}: ${err instanceof Error ? err.message : String(err)}`, true);
    }
  }

  private _logQuery(limit: number): string {
    const q = new URLSearchParams({ limit: String(limit), orderBy: 'ORDER_BY_DESC' });
    if (this._search.value) {
      q.set('searchText', this._search.value);
    }
    if (this._level) {
      q.append('levels', this._level);
    }
    if (/^\d+$/.test(this._rank.value.trim())) {
      q.append('rankIds', this._rank.value.trim());
    }
    return `api/v1/trials/${this.trialId}/logs?${q}`;
  }

  private async _loadLogs(): Promise<void> {
    try {
      const resp = await this.api.raw(this._logQuery(LOG_LINES));
      const entries = parseLogStream(await resp.text()).reverse();
      this._lines = entries.map(e => String(e.message ?? e.log ?? '').replace(/\n$/, ''));
      const atBottom = this._log.scrollTop + this._log.clientHeight >= this._log.scrollHeight - 4;
      this._log.textContent = this._lines.join('\n');
      this._log.dataset.lines = String(this._lines.length);
      if (this._follow && atBottom) {
        this._log.scrollTop = this._log.scrollHeight;
      }
      this._logLoaded = true;
    } catch (err) {
      this._log.textContent = `cannot read the log: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  private async _download(): Promise<void> {
    try {
      const resp = await this.api.raw(this._logQuery(0).replace('limit=0&orderBy=ORDER_BY_DESC', 'orderBy=ORDER_BY_ASC'));
      const lines = parseLogStream(await resp.text()).map(e => String(e.message ?? e.log ?? '').replace(/\n$/, ''));
      save(new Blob([lines.join('\n') + '\n'], { type: 'text/plain' }), `trial-${this.trialId}.log`);
    } catch (err) {
      this.setStatus(`cannot download the log: ${err instanceof Error ? err.message : String(err)}`, true);
    }
  }

  dispose(): void {
    this._chart.dispose();
    super.dispose();
  }

  private _header: HTMLElement;
  private _chart: Chart;
  private _search: HTMLInputElement;
  private _rank: HTMLInputElement;
  private _level = '';
  private _follow = true;
  private _log: HTMLElement;
  private _lines: string[] = [];
  private _logLoaded = false;
  private _checkpoints: HTMLElement;
}

/** One panel per metric name: its training and validation series on its own axes. */
export function metricPanels(groups: Record<string, any[]>): IPanel[] {
  const names = new Set<string>();
  for (const data of Object.values(groups)) {
    for (const p of data) {
      for (const [k, v] of Object.entries(p.values ?? {})) {
        if (typeof v === 'number') {
          names.add(k);
        }
      }
    }
  }
  const panels = [...names].sort().map(name => ({
    title: name, xlabel: 'batches', ylabel: name, empty: 'no data',
    series: ['training', 'validation'].filter(g => (groups[g] ?? []).some(p => typeof p.values?.[name] === 'number'))
      .map((g, i) => {
        const points = (groups[g] ?? []).filter(p => typeof p.values?.[name] === 'number');
        return {
          name: g, x: points.map(p => p.batches), mode: 'lines+markers' as const, color: i,
          y: points.map(p => Number.isFinite(p.values[name]) ? p.values[name] : null)
        };
      })
  }));
  return panels.length ? panels : [{ title: 'metrics', empty: 'no metrics yet', series: [] }];
}

function save(blob: Blob, name: string): void {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
