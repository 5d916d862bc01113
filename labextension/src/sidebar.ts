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
        <section data-section="experiments"><h3>Experiments</h3><div data-det="experiments"></div></section>
        <section data-section="jobs"><h3>Jobs</h3><div data-det="jobs"></div></section>
        <section data-section="cluster"><h3>Cluster</h3><div data-det="cluster"></div></section>
        <section data-section="tasks"><h3>Notebooks &amp; TensorBoards</h3>
          <div data-det="tasks"></div>
        </section>
      </div>`;
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
    const table = this._table(['ID', 'Name', 'State', '%', 'Best', '']);
    const metrics = [...new Set(rows.map(r => r.metric).filter(m => m))];
    table.tHead!.rows[0].cells[4].title = metrics.length
      ? `best validation ${metrics.join(', ')} (the searcher metric)`
      : 'best searcher metric';
    for (const r of rows) {
      const tr = this._row(table, [String(r.id), r.name, r.state, r.progress, r.best], [1]);
      tr.children[4].setAttribute('title', r.metric);
      tr.dataset.experimentId = String(r.id);
      tr.children[2].classList.add('det-Sidebar-state', `det-mod-${r.state.toLowerCase()}`);
      const button = document.createElement('button');
      button.className = 'det-Sidebar-open';
      button.title = `Describe experiment ${r.id} in a notebook cell or console`;
      button.textContent = 'Open';
      button.addEventListener('click', () => this._open(r.id));
      tr.insertCell().appendChild(button);
    }
    host.replaceChildren(table);
  }

  private _renderJobs(rows: JobRow[]): void {
    const host = this._part('jobs');
    if (rows.length === 0) {
      host.innerHTML = '<div class="det-Sidebar-empty">none</div>';
      return;
    }
    const table = this._table(['#', 'Job', 'State', 'Slots', 'Waiting for']);
    for (const r of rows) {
      const tr = this._row(table, [String(r.position), r.name, r.state, r.slots, r.wait], [1, 4]);
      tr.dataset.jobPosition = String(r.position);
      tr.children[1].setAttribute('title', `${r.kind.toLowerCase()} in pool ${r.pool}`);
    }
    host.replaceChildren(table);
  }

  private _renderCluster(view: ClusterView): void {
    const host = this._part('cluster');
    const summary = document.createElement('div');
    summary.className = 'det-Sidebar-summary';
    summary.dataset.det = 'cluster-summary';
    summary.textContent = `${view.agents.length} agent${view.agents.length === 1 ? '' : 's'}, ` +
      `${view.used}/${view.total} slots used`;
    const table = this._table(['Agent', 'Pool', 'Slots used', '']);
    for (const a of view.agents) {
      this._row(table, [a.id, a.pool, `${a.used}/${a.total}`, a.enabled ? '' : 'disabled'], [0]);
    }
    host.replaceChildren(summary, ...(view.agents.length ? [table] : []));
  }

  private _renderTasks(rows: TaskRow[]): void {
    const host = this._part('tasks');
    if (rows.length === 0) {
      host.innerHTML = '<div class="det-Sidebar-empty">none</div>';
      return;
    }
    const table = this._table(['Kind', 'Description', 'State', '']);
    for (const r of rows) {
      const kind = r.kind === 'notebook' ? 'Notebook' : 'TensorBoard';
      const tr = this._row(table, [kind, r.description, r.state], [1]);
      tr.dataset.taskId = r.id;
      tr.dataset.taskKind = r.kind;
      tr.children[1].setAttribute('title', r.title);
      tr.children[2].classList.add('det-Sidebar-state', `det-mod-${r.state}`);
      const button = document.createElement('button');
      button.className = 'det-Sidebar-open';
      button.title = `Open ${kind} ${r.id} in a new browser tab`;
      button.textContent = 'Open';
      button.addEventListener('click', () => void this._openTask(r));
      tr.insertCell().appendChild(button);
    }
    host.replaceChildren(table);
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

  private _table(headers: string[]): HTMLTableElement {
    const table = document.createElement('table');
    table.className = 'det-Sidebar-table';
    const head = table.createTHead().insertRow();
    for (const h of headers) {
      const th = document.createElement('th');
      th.textContent = h;
      head.appendChild(th);
    }
    table.createTBody();
    return table;
  }

  /** A body row; the cells at `wrap` may break lines (names, reasons), the rest do not. */
  private _row(table: HTMLTableElement, cells: string[], wrap: number[] = []): HTMLTableRowElement {
    const tr = table.tBodies[0].insertRow();
    cells.forEach((c, i) => {
      const td = tr.insertCell();
      td.textContent = c;
      if (wrap.includes(i)) {
        td.classList.add('det-mod-wrap');
      }
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
