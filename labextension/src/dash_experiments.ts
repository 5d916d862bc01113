/**
 * The experiments table: filters, paging (server-side), chosen columns (hyperparameters, and
 * metrics of each experiment's best trial: one request a page), labels, bulk pause / activate / kill / archive / unarchive / move with a
 * confirmation, click-through to an experiment, and buttons that launch a notebook or a
 * TensorBoard of the chosen experiments, and a Compare button that opens the chosen experiments'
 * comparison (dash_compare.ts).
 */

import { DetApi } from './api';
import { IColumn, INavigator, DashPanel, button, flatten, h, hpText, metricNames, num, select, state, table, when } from './dash_common';
import { taskPath, taskUrl } from './model';

const PAGE = 50;
const STATES: [string, string][] = [
  ['', 'any state'], ['STATE_ACTIVE', 'active'], ['STATE_RUNNING', 'running'], ['STATE_QUEUED', 'queued'],
  ['STATE_PAUSED', 'paused'], ['STATE_COMPLETED', 'completed'], ['STATE_CANCELED', 'canceled'],
  ['STATE_ERROR', 'error']
];
const VERBS: Record<string, { label: string; path: (id: number) => string; ask?: string }> = {
  pause: { label: 'Pause', path: id => `api/v1/experiments/${id}/pause` },
  activate: { label: 'Activate', path: id => `api/v1/experiments/${id}/activate` },
  kill: {
    label: 'Kill', path: id => `api/v1/experiments/${id}/kill`,
    ask: 'Their running trials stop now, without a checkpoint.'
  },
  archive: { label: 'Archive', path: id => `api/v1/experiments/${id}/archive`, ask: 'Archived experiments are hidden from lists.' },
  unarchive: { label: 'Unarchive', path: id => `api/v1/experiments/${id}/unarchive` }
};

const START_WAIT_MS = 10 * 60 * 1000;

/**
 * Start a notebook or TensorBoard and open it in a tab opened now (while the click still
 * counts as a user gesture), which says it is starting until the task answers, then goes to
 * its proxied page with a fresh ticket. Resolves with the task id once it is open.
 */
export async function launchTask(api: DetApi, kind: 'notebook' | 'tensorboard', body: unknown): Promise<string> {
  const tab = window.open('', '_blank');
  const say = (text: string): void => {
    if (tab) {
      tab.document.title = `det: ${kind}`;
      tab.document.body.textContent = text;
    }
  };
  try {
    say(`Starting a ${kind}…`);
    const reply = await api.send('POST', `api/v1/${kind}s`, body);
    const id = String(reply[kind]?.id ?? '');
    const deadline = Date.now() + START_WAIT_MS;
    for (;;) {
      const now = await api.get(taskPath(kind, id));
      const state = String(now[kind]?.state ?? '');
      if (state === 'STATE_RUNNING') {
        const url = taskUrl(api.baseUrl, kind, id, String(now.ticket ?? ''), now[kind]?.proxyUrl);
        if (tab) {
          tab.opener = null; // the task's pages get no handle on this window
          tab.location.href = url;
        }
        return id;
      }
      if (state === 'STATE_TERMINATED' || state === 'STATE_TERMINATING') {
        throw new Error(`${kind} ${id} ended before it ran (det task logs ${id})`);
      }
      if (Date.now() > deadline) {
        throw new Error(`${kind} ${id} is still ${state.replace(/^STATE_/, '').toLowerCase()} after 10 minutes`);
      }
      say(`${kind} ${id}: ${state.replace(/^STATE_/, '').toLowerCase()}… (this tab opens it once it answers)`);
      await new Promise(resolve => window.setTimeout(resolve, 1000));
    }
  } catch (err) {
    tab?.close();
    throw err;
  }
}

export class ExperimentsPanel extends DashPanel {
  constructor(api: DetApi, nav: INavigator) {
    super(api, nav, 4000);
    this.id = 'det-dash-experiments';
    this.title.label = 'det: experiments';
    this.addClass('det-Dash-experiments');
    this._text = h('input', { className: 'jp-mod-styled', placeholder: 'name contains', 'data-det': 'filter' });
    this._text.addEventListener('change', () => this._restart());
    const states = select(STATES, '', v => {
      this._state = v;
      this._restart();
    }, { 'data-det': 'state' });
    const who = select([['mine', 'mine'], ['all', "everyone's"]], 'mine', v => {
      this._all = v === 'all';
      this._restart();
    }, { 'data-det': 'users' });
    const archived = h('input', { type: 'checkbox', 'data-det': 'archived' });
    archived.addEventListener('change', () => {
      this._archived = archived.checked;
      this._restart();
    });
    this._columns = h('details', { className: 'det-Dash-columns' }, h('summary', {}, 'columns'));
    this._actions = h('div', { className: 'det-Dash-actions' });
    for (const [verb, spec] of Object.entries(VERBS)) {
      this._actions.append(button(spec.label, () => this._bulk(verb), { 'data-verb': verb }));
    }
    this._move = h('select', { className: 'jp-mod-styled det-Dash-select', 'data-det': 'move' });
    this._move.addEventListener('change', () => this._bulkMove());
    this._actions.append(this._move);
    this._actions.append(
      button('New notebook', () => void this._launch('notebook', {}), { 'data-det': 'launch-notebook' }),
      button('TensorBoard', () => void this._launch('tensorboard', { experimentIds: [...this._chosen] }),
        { 'data-det': 'launch-tensorboard' }),
      button('Compare', () => this.nav.compare([...this._chosen].sort((a, b) => a - b)), { 'data-det': 'compare' })
    );
    this._pager = h('span', { className: 'det-Dash-pager' });
    const toolbar = h('div', { className: 'det-Dash-toolbar' }, this._text, states, who,
      h('label', {}, archived, ' archived too'), this._columns);
    this._table = h('div', { className: 'det-Dash-scroll' });
    this.body.append(toolbar, this._actions, this._table, this._pager);
  }

  protected async load(): Promise<any> {
    const q = new URLSearchParams({
      limit: String(PAGE), offset: String(this._offset), sortBy: 'SORT_BY_ID', orderBy: 'ORDER_BY_DESC'
    });
    if (this._state) {
      q.append('states', this._state);
    }
    if (this._text.value.trim()) {
      q.set('name', this._text.value.trim());
    }
    if (!this._archived) {
      q.set('archived', 'false');
    }
    if (!this._all && this.api.username) {
      q.append('users', this.api.username);
    }
    const page = await this.api.get(`api/v1/experiments?${q}`);
    if (this._projects === null) {
      this._projects = await this._loadProjects();
    }
    page.bestTrials = await bestTrials(this.api, page.experiments ?? []);
    return page;
  }

  protected render(page: any): void {
    const experiments: any[] = page.experiments ?? [];
    const total = Number(page.pagination?.total ?? experiments.length);
    const ids = new Set(experiments.map(e => Number(e.id)));
    for (const id of [...this._chosen]) {
      if (!ids.has(id)) {
        this._chosen.delete(id);
      }
    }
    // Columns to choose from: the page's hyperparameters (varying ones first) and metrics.
    const hps = new Set<string>();
    for (const e of experiments) {
      for (const k of Object.keys(flatten(e.config?.hyperparameters ?? {}))) {
        hps.add(k.replace(/\.(val|type|minval|maxval|vals|count|base)$/, ''));
      }
    }
    const best: Map<number, any> = page.bestTrials ?? new Map();
    const metrics = new Set<string>();
    for (const t of best.values()) {
      for (const m of metricNames([t])) {
        metrics.add(m);
      }
    }
    this._renderColumnChooser([...hps].sort(), [...metrics].sort());
    const columns: IColumn<any>[] = [
      {
        key: 'pick', label: '', cell: e => {
          const box = h('input', { type: 'checkbox', 'data-id': e.id });
          box.checked = this._chosen.has(Number(e.id));
          box.addEventListener('change', () => {
            box.checked ? this._chosen.add(Number(e.id)) : this._chosen.delete(Number(e.id));
            this._enable();
          });
          return box;
        }
      },
      { key: 'id', label: 'ID', cell: e => String(e.id), numeric: true },
      { key: 'name', label: 'Name', cell: e => String(e.name ?? '') },
      { key: 'owner', label: 'Owner', cell: e => String(e.username ?? e.displayName ?? '') },
      { key: 'state', label: 'State', cell: e => state(e.state) + (e.archived ? ' (archived)' : '') },
      { key: 'progress', label: 'Progress', cell: e => typeof e.progress === 'number' && e.progress > 0 ? `${Math.round(e.progress * 100)}%` : '—', numeric: true },
      { key: 'trials', label: 'Trials', cell: e => String(e.numTrials ?? ''), numeric: true },
      { key: 'searcher', label: 'Searcher', cell: e => String(e.searcherType ?? e.config?.searcher?.name ?? '') },
      { key: 'metric', label: 'Best', cell: e => `${e.config?.searcher?.metric ?? ''} ${num(e.bestTrialSearcherMetric)}`.trim(), numeric: true },
      { key: 'labels', label: 'Labels', cell: e => (e.labels ?? []).join(', ') },
      { key: 'start', label: 'Started', cell: e => when(e.startTime) }
    ];
    for (const hp of this._shownHps) {
      columns.push({ key: `hp:${hp}`, label: hp, cell: e => hpSpec(e.config?.hyperparameters ?? {}, hp) });
    }
    for (const m of this._shownMetrics) {
      columns.push({
        key: `metric:${m}`, label: m, numeric: true,
        cell: e => num(bestTrialMetric(best.get(Number(e.bestTrialId)), m))
      });
    }
    this._table.replaceChildren(
      experiments.length
        ? h('div', {}, table(columns, experiments, e => this.nav.experiment(Number(e.id)), e => String(e.id)))
        : h('p', { className: 'det-Dash-empty' }, 'No experiments match.')
    );
    const first = total ? this._offset + 1 : 0;
    const last = this._offset + experiments.length;
    this._pager.replaceChildren(
      button('‹ newer', () => this._page(-PAGE), { disabled: this._offset === 0 }),
      h('span', {}, ` ${first}–${last} of ${total} `),
      button('older ›', () => this._page(PAGE), { disabled: last >= total })
    );
    this._enable();
  }

  private _enable(): void {
    const n = this._chosen.size;
    for (const b of Array.from(this._actions.querySelectorAll<HTMLButtonElement>('button[data-verb]'))) {
      b.disabled = n === 0;
    }
    (this._actions.querySelector('[data-det="launch-tensorboard"]') as HTMLButtonElement).disabled = n === 0;
    (this._actions.querySelector('[data-det="compare"]') as HTMLButtonElement).disabled = n === 0;
    this._move.disabled = n === 0;
    this._move.replaceChildren(h('option', { value: '' }, n ? `move ${n} to project…` : 'move to project…'),
      ...(this._projects ?? []).map(p => h('option', { value: String(p.id) }, `${p.workspace} / ${p.name}`)));
  }

  /** Checkboxes for the page's hyperparameters and its best trials' metrics. */
  private _renderColumnChooser(hps: string[], metrics: string[]): void {
    const key = [...hps, '', ...metrics].join('\n');
    if ((this._columns.dataset.columns ?? null) === key) {
      return;
    }
    this._columns.dataset.columns = key;
    const summary = (): string => `columns (${this._shownHps.size} hyperparameters, ${this._shownMetrics.size} metrics)`;
    this._columns.replaceChildren(h('summary', {}, summary()));
    const group = (title: string, names: string[], shown: Set<string>, attr: string): void => {
      if (!names.length) {
        return;
      }
      this._columns.append(h('div', { className: 'det-Dash-columns-group' }, title));
      for (const name of names) {
        const box = h('input', { type: 'checkbox', [attr]: name });
        box.checked = shown.has(name);
        box.addEventListener('change', () => {
          box.checked ? shown.add(name) : shown.delete(name);
          this._columns.querySelector('summary')!.textContent = summary();
          void this.refresh();
        });
        this._columns.append(h('label', {}, box, ` ${name}`));
      }
    };
    group('hyperparameters', hps, this._shownHps, 'data-hp');
    group("best trial's metrics (latest)", metrics, this._shownMetrics, 'data-metric');
  }

  private _bulk(verb: string): void {
    const spec = VERBS[verb];
    const ids = [...this._chosen].sort((a, b) => a - b);
    const run = async (): Promise<void> => {
      const failed: string[] = [];
      for (const id of ids) {
        try {
          await this.api.send('POST', spec.path(id));
        } catch (err) {
          failed.push(`${id}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      if (failed.length) {
        throw new Error(`${spec.label} failed for ${failed.join('; ')}`);
      }
    };
    this.ask(`${spec.label} ${ids.length} experiment(s): ${ids.join(', ')}?${spec.ask ? ' ' + spec.ask : ''}`,
      `Yes, ${spec.label.toLowerCase()}`, run);
  }

  private _bulkMove(): void {
    const target = Number(this._move.value);
    if (!target) {
      return;
    }
    const project = (this._projects ?? []).find(p => p.id === target);
    const ids = [...this._chosen].sort((a, b) => a - b);
    this._move.value = '';
    this.ask(`Move ${ids.length} experiment(s) to ${project?.workspace} / ${project?.name}?`, 'Yes, move', async () => {
      for (const id of ids) {
        await this.api.send('POST', `api/v1/experiments/${id}/move`, { destinationProjectId: target });
      }
    });
  }

  private async _launch(kind: 'notebook' | 'tensorboard', body: unknown): Promise<void> {
    try {
      this.setStatus(`starting a ${kind}; it opens in a new tab once it answers`);
      const id = await launchTask(this.api, kind, body);
      this.setStatus(`${kind} ${id} is open in its tab`);
    } catch (err) {
      this.setStatus(`cannot start a ${kind}: ${err instanceof Error ? err.message : String(err)}`, true);
    }
  }

  private async _loadProjects(): Promise<{ id: number; name: string; workspace: string }[]> {
    const out: { id: number; name: string; workspace: string }[] = [];
    try {
      const ws = await this.api.get('api/v1/workspaces?limit=100');
      for (const w of ws.workspaces ?? []) {
        const ps = await this.api.get(`api/v1/workspaces/${w.id}/projects?limit=100`);
        for (const p of ps.projects ?? []) {
          if (!p.archived) {
            out.push({ id: Number(p.id), name: String(p.name), workspace: String(w.name) });
          }
        }
      }
    } catch {
      // no projects to move to: the select stays empty
    }
    return out;
  }

  private _page(delta: number): void {
    this._offset = Math.max(0, this._offset + delta);
    void this.refresh();
  }

  private _restart(): void {
    this._offset = 0;
    void this.refresh();
  }

  private _text: HTMLInputElement;
  private _state = '';
  private _all = false;
  private _archived = false;
  private _offset = 0;
  private _chosen = new Set<number>();
  private _shownHps = new Set<string>();
  private _shownMetrics = new Set<string>();
  private _projects: { id: number; name: string; workspace: string }[] | null = null;
  private _columns: HTMLDetailsElement;
  private _actions: HTMLElement;
  private _move: HTMLSelectElement;
  private _table: HTMLElement;
  private _pager: HTMLElement;
}

/**
 * The best trials of `experiments` by id, with their metric summaries: one request for the
 * page (the time-series route answers trials by id; asked for no metric, it sends no series).
 */
export async function bestTrials(api: DetApi, experiments: any[]): Promise<Map<number, any>> {
  const ids = [...new Set(experiments.map(e => Number(e.bestTrialId)).filter(id => id > 0))];
  const out = new Map<number, any>();
  if (!ids.length) {
    return out;
  }
  const q = new URLSearchParams({ maxDatapoints: '1' });
  for (const id of ids) {
    q.append('trialIds', String(id));
  }
  const body = await api.get(`api/v1/trials/time-series?${q}`);
  for (const entry of body.trials ?? []) {
    out.set(Number(entry.trial?.id), entry.trial);
  }
  return out;
}

/** A trial's latest value of `validation.x` or `training.x` (its metric summary's `last`). */
export function bestTrialMetric(trial: any, metric: string): unknown {
  const [group, ...rest] = metric.split('.');
  const key = group === 'validation' ? 'validation_metrics' : 'avg_metrics';
  return trial?.summaryMetrics?.[key]?.[rest.join('.')]?.last;
}

/** A hyperparameter's definition in an experiment's config, shortly: `0.01`, `log(-4..-1)`, `adam|sgd`. */
function hpSpec(hps: Record<string, any>, name: string): string {
  let node: any = hps;
  for (const part of name.split('.')) {
    node = node?.[part];
    if (node && typeof node === 'object' && node.type && part !== name.split('.').slice(-1)[0]) {
      break;
    }
  }
  if (node === undefined || node === null) {
    return '';
  }
  if (typeof node !== 'object') {
    return hpText(node);
  }
  switch (node.type) {
    case 'const': return hpText(node.val);
    case 'int':
    case 'double': return `${num(node.minval)}..${num(node.maxval)}`;
    case 'log': return `${num(node.base ?? 10)}^(${num(node.minval)}..${num(node.maxval)})`;
    case 'categorical': return (node.vals ?? []).map(hpText).join('|');
    default: return hpText(node);
  }
}
