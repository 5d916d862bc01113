/**
 * The left-sidebar panel: experiments, jobs, the cluster, and the user's notebooks and
 * TensorBoards, polled from the det REST API.
 */

import { Widget } from '@lumino/widgets';

import { ApiError, AuthRequired, DetApi } from './api';
import {
  ClusterView,
  ExperimentRow,
  JobRow,
  TaskRow,
  clusterView,
  experimentRows,
  jobRows,
  taskPath,
  taskRows,
  taskUrl
} from './model';

/** Seconds between polls while the panel is visible. */
export const POLL_INTERVAL_MS = 3000;
const EXPERIMENT_LIMIT = 50;

export interface ISidebarOptions {
  api: DetApi;
  /** Called when the user asks to describe an experiment in a notebook or console. */
  openExperiment: (id: number) => void;
  /** Opens the dashboard's main-area panels (its buttons at the top of the content). */
  openDashboard?: { experiments(): void; registry(): void };
}

export class DetSidebar extends Widget {
  constructor(options: ISidebarOptions) {
    super();
    this._api = options.api;
    this._open = options.openExperiment;
    this.id = 'det-jupyter-sidebar';
    this.addClass('det-Sidebar');
    this.node.innerHTML = `
      <div class="det-Sidebar-header">
        <span class="det-Sidebar-title">det-jupyter</span>
        <span class="det-Sidebar-status" data-det="status">connecting…</span>
      </div>
      <form class="det-Sidebar-login" data-det="login" hidden>
        <p>Log in to the det master</p>
        <input name="username" placeholder="username" autocomplete="username" value="admin" />
        <input name="password" type="password" placeholder="password" autocomplete="current-password" />
        <button type="submit" class="jp-mod-styled jp-mod-accept">Log in</button>
        <p class="det-Sidebar-error" data-det="login-error"></p>
      </form>
      <div data-det="content" hidden>
        <div class="det-Sidebar-nav">
          <button type="button" class="jp-mod-styled" data-det="dash-experiments">Dashboard</button>
          <button type="button" class="jp-mod-styled" data-det="dash-registry">Model registry</button>
        </div>
        <section data-section="experiments"><h3>Experiments</h3><div data-det="experiments"></div></section>
        <section data-section="jobs"><h3>Jobs</h3><div data-det="jobs"></div></section>
        <section data-section="cluster"><h3>Cluster</h3><div data-det="cluster"></div></section>
        <section data-section="tasks"><h3>Notebooks &amp; TensorBoards</h3>
          <div data-det="tasks"></div>
        </section>
      </div>`;
    const dashboard = options.openDashboard;
    this._part('dash-experiments').addEventListener('click', () => dashboard?.experiments());
    this._part('dash-registry').addEventListener('click', () => dashboard?.registry());
    this._part('login').addEventListener('submit', event => {
      event.preventDefault();
      void this._login();
    });
  }

  /** Fetch once now (also what each poll does). */
  async refresh(): Promise<void> {
    if (this._refreshing) {
      return;
    }
    this._refreshing = true;
    try {
      if (!(await this._api.connect())) {
        // Waits for the form: probing again every poll would only fill the server's log.
        this._showLogin(true);
        return;
      }
      this._showLogin(false);
      // Notebooks and TensorBoards: a master without the route (404) runs none.
      const [experiments, pools, agents, notebooks, tensorboards] = await Promise.all([
        this._api.get(`api/v1/experiments?limit=${EXPERIMENT_LIMIT}&orderBy=ORDER_BY_DESC`),
        this._api.get('api/v1/resource-pools'),
        this._api.get('api/v1/agents'),
        this._api.getOptional('api/v1/notebooks'),
        this._api.getOptional('api/v1/tensorboards')
      ]);
      const names: string[] = (pools.resourcePools ?? []).map((p: any) => String(p.name));
      const queues = await Promise.all(
        names.map(name =>
          this._api.get(`api/v1/job-queues-v2?resourcePool=${encodeURIComponent(name)}`)
        )
      );
      this._renderExperiments(experimentRows(experiments));
      this._renderJobs(queues.flatMap(jobRows));
      this._renderCluster(clusterView(agents));
      this._renderTasks(taskRows(notebooks, tensorboards, this._api.username));
      this._setStatus(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      if (err instanceof AuthRequired) {
        this._showLogin(true);
      } else {
        this._setStatus(err instanceof ApiError ? err.message : `offline: ${String(err)}`, true);
      }
    } finally {
      this._refreshing = false;
    }
  }

  protected onAfterAttach(): void {
    this._schedule(0);
  }

  protected onAfterShow(): void {
    this._schedule(0);
  }

  protected onBeforeDetach(): void {
    window.clearTimeout(this._timer);
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    super.dispose();
  }

  /** Poll while the panel is visible; a hidden sidebar costs the master nothing. */
  private _schedule(delay: number): void {
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(async () => {
      if (this.isDisposed || !this.isAttached) {
        return;
      }
      const waitingForLogin = !this._part('login').hidden;
      if (this.isVisible && document.visibilityState !== 'hidden' && !waitingForLogin) {
        await this.refresh();
      }
      this._schedule(POLL_INTERVAL_MS);
    }, delay);
  }

  private async _login(): Promise<void> {
    const form = this._part('login') as HTMLFormElement;
    const username = (form.elements.namedItem('username') as HTMLInputElement).value;
    const password = (form.elements.namedItem('password') as HTMLInputElement).value;
    const error = this._part('login-error');
    error.textContent = '';
    try {
      await this._api.login(username, password);
      (form.elements.namedItem('password') as HTMLInputElement).value = '';
      await this.refresh();
    } catch (err) {
      error.textContent = err instanceof Error ? err.message : String(err);
    }
  }

  private _renderExperiments(rows: ExperimentRow[]): void {
    const host = this._part('experiments');
    if (rows.length === 0) {
      host.innerHTML = '<div class="det-Sidebar-empty">none</div>';
      return;
    }
    const table = this._table([
      ['ID', 'id'], ['Name', 'name'], ['State', 'state'], ['%', 'pct'], ['Best', 'best'], ['', 'open']
    ]);
    const metrics = [...new Set(rows.map(r => r.metric).filter(m => m))];
    table.tHead!.rows[0].cells[4].title = metrics.length
      ? `best validation ${metrics.join(', ')} (the searcher metric)`
      : 'best searcher metric';
    for (const r of rows) {
      const tr = this._row(table, [String(r.id), r.name, r.state, r.progress, r.best]);
      tr.children[4].setAttribute('title', r.metric);
      tr.dataset.experimentId = String(r.id);
      tr.children[2].classList.add('det-Sidebar-state', `det-mod-${r.state.toLowerCase()}`);
      nameCell(tr.cells[1], r.name);
      this._opens(tr, `experiment ${r.id}`, `Describe experiment ${r.id} in a notebook cell or console`,
        () => this._open(r.id));
    }
    this._show(host, table);
  }

  private _renderJobs(rows: JobRow[]): void {
    const host = this._part('jobs');
    if (rows.length === 0) {
      host.innerHTML = '<div class="det-Sidebar-empty">none</div>';
      return;
    }
    const table = this._table([
      ['#', 'pos'], ['Job', 'name'], ['State', 'state'], ['Slots', 'slots'], ['Waiting for', 'wrap']
    ]);
    for (const r of rows) {
      const tr = this._row(table, [String(r.position), r.name, r.state, r.slots, r.wait]);
      tr.dataset.jobPosition = String(r.position);
      const where = `${r.kind.toLowerCase()} in pool ${r.pool}`;
      tr.children[1].setAttribute('title', where);
      nameCell(tr.cells[1], r.name, where);
    }
    this._show(host, table);
  }

  private _renderCluster(view: ClusterView): void {
    const host = this._part('cluster');
    const summary = document.createElement('div');
    summary.className = 'det-Sidebar-summary';
    summary.dataset.det = 'cluster-summary';
    summary.textContent = `${view.agents.length} agent${view.agents.length === 1 ? '' : 's'}, ` +
      `${view.used}/${view.total} slots used`;
    const table = this._table([['Agent', 'wrap'], ['Pool', 'pool'], ['Slots used', 'used'], ['', 'flag']]);
    for (const a of view.agents) {
      this._row(table, [a.id, a.pool, `${a.used}/${a.total}`, a.enabled ? '' : 'disabled']);
    }
    host.replaceChildren(summary, ...(view.agents.length ? [table] : []));
  }

  private _renderTasks(rows: TaskRow[]): void {
    const host = this._part('tasks');
    if (rows.length === 0) {
      host.innerHTML = '<div class="det-Sidebar-empty">none</div>';
      return;
    }
    const table = this._table([['Kind', 'kind'], ['Description', 'name'], ['State', 'state'], ['', 'open']]);
    for (const r of rows) {
      const kind = r.kind === 'notebook' ? 'Notebook' : 'TensorBoard';
      const tr = this._row(table, [kind, r.description, r.state]);
      tr.dataset.taskId = r.id;
      tr.dataset.taskKind = r.kind;
      tr.children[1].setAttribute('title', r.title);
      tr.children[2].classList.add('det-Sidebar-state', `det-mod-${r.state}`);
      nameCell(tr.cells[1], r.description, r.title);
      this._opens(tr, `${r.kind} ${r.id}`, `Open ${kind} ${r.id} in a new browser tab`,
        () => void this._openTask(r));
    }
    this._show(host, table);
  }

  /**
   * Make a click, Enter or Space anywhere on `tr` do `open`, and give the row an Open button
   * (for the eye; it has no listener of its own: its click bubbles to the row's, so it opens
   * once, and the row, not the button, is the tab stop). `key` names the row across polls.
   */
  private _opens(tr: HTMLTableRowElement, key: string, what: string, open: () => void): void {
    tr.classList.add('det-mod-clickable');
    tr.tabIndex = 0;
    tr.title = what;
    tr.dataset.openKey = key;
    tr.addEventListener('click', () => {
      // A drag that selects text in the row (to copy a name) is not a click on it.
      const selection = window.getSelection();
      if (selection && !selection.isCollapsed && tr.contains(selection.anchorNode)) {
        return;
      }
      open();
    });
    tr.addEventListener('keydown', event => {
      if (event.target === tr && (event.key === 'Enter' || event.key === ' ')) {
        event.preventDefault(); // Space would scroll the panel
        open();
      }
    });
    const button = document.createElement('button');
    button.className = 'det-Sidebar-open';
    button.title = what;
    button.tabIndex = -1;
    button.textContent = 'Open';
    tr.insertCell().appendChild(button);
    tr.cells[tr.cells.length - 1].className = 'det-Sidebar-col-open';
  }

  /** Show `table` in `host`; a row that had the keyboard focus keeps it across the re-render. */
  private _show(host: HTMLElement, table: HTMLTableElement): void {
    const focused = document.activeElement as HTMLElement | null;
    const key = focused && host.contains(focused) ? focused.dataset.openKey : undefined;
    host.replaceChildren(table);
    if (key !== undefined) {
      const row = Array.from(table.tBodies[0].rows).find(tr => tr.dataset.openKey === key);
      row?.focus({ preventScroll: true });
    }
  }

  /**
   * Open a notebook or TensorBoard in a new tab. The tab opens at once, while the click still
   * counts as a user gesture (a popup blocker lets it through), and goes to the proxied task
   * once the master has handed out its ticket.
   */
  private async _openTask(row: TaskRow): Promise<void> {
    const tab = window.open('', '_blank');
    try {
      const body = await this._api.get(taskPath(row.kind, row.id));
      if (typeof body.ticket !== 'string' || body.ticket === '') {
        throw new Error(`the master gave no ticket for ${row.kind} ${row.id}`);
      }
      const url = taskUrl(
        this._api.baseUrl,
        row.kind,
        row.id,
        body.ticket,
        body[row.kind]?.proxyUrl
      );
      if (tab) {
        tab.opener = null; // the task's pages get no handle on this window
        tab.location.href = url;
      } else {
        window.open(url, '_blank', 'noopener');
      }
    } catch (err) {
      tab?.close();
      if (err instanceof AuthRequired) {
        this._showLogin(true);
      } else {
        const why = err instanceof Error ? err.message : String(err);
        this._setStatus(`cannot open ${row.kind} ${row.id}: ${why}`, true);
      }
    }
  }

  /**
   * A table of `[header, column]` columns: each th and td gets the class `det-Sidebar-col-<column>`,
   * which sets its width and which narrow panels hide it (index.css). Column `name` takes what
   * the others leave; `wrap` too, and its text wraps.
   */
  private _table(columns: [string, string][]): HTMLTableElement {
    const table = document.createElement('table');
    table.className = 'det-Sidebar-table';
    const head = table.createTHead().insertRow();
    for (const [label, column] of columns) {
      const th = document.createElement('th');
      th.textContent = label;
      th.className = `det-Sidebar-col-${column}`;
      head.appendChild(th);
    }
    table.createTBody();
    return table;
  }

  /** A body row, its cells in the columns of the table's header. */
  private _row(table: HTMLTableElement, cells: string[]): HTMLTableRowElement {
    const header = table.tHead!.rows[0].cells;
    const tr = table.tBodies[0].insertRow();
    cells.forEach((c, i) => {
      const td = tr.insertCell();
      td.textContent = c;
      td.className = header[i].className;
    });
    return tr;
  }

  private _showLogin(show: boolean): void {
    this._part('login').hidden = !show;
    this._part('content').hidden = show;
    if (show) {
      this._setStatus('not logged in');
    }
  }

  private _setStatus(text: string, error = false): void {
    const status = this._part('status');
    status.textContent = text;
    status.classList.toggle('det-mod-error', error);
  }

  private _part(name: string): HTMLElement {
    return this.node.querySelector(`[data-det="${name}"]`) as HTMLElement;
  }

  private _api: DetApi;
  private _open: (id: number) => void;
  private _timer = 0;
  private _refreshing = false;
}

/**
 * Show `text` on one line, cut with an ellipsis where the column is too narrow, and whole in a
 * tooltip (with `detail` on a second line).
 */
function nameCell(td: HTMLTableCellElement, text: string, detail = ''): void {
  const span = document.createElement('span');
  span.className = 'det-Sidebar-name';
  span.textContent = text;
  span.title = detail ? `${text}\n${detail}` : text;
  td.replaceChildren(span);
}
