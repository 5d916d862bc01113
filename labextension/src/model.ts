/**
 * What the sidebar shows, as pure functions of det API responses (no DOM, no fetch).
 */

export interface ExperimentRow {
  id: number;
  name: string;
  state: string;
  progress: string;
  best: string;
  metric: string;
}

export interface JobRow {
  position: number;
  name: string;
  kind: string;
  state: string;
  pool: string;
  slots: string;
  wait: string;
}

export interface AgentRow {
  id: string;
  pool: string;
  used: number;
  total: number;
  enabled: boolean;
}

export interface ClusterView {
  agents: AgentRow[];
  used: number;
  total: number;
}

export type TaskKind = 'notebook' | 'tensorboard';

/** A notebook or TensorBoard that has not ended. */
export interface TaskRow {
  id: string;
  kind: TaskKind;
  description: string;
  /** Lower case: `queued`, `starting`, `running`, `terminating`. */
  state: string;
  owner: string;
  /** The description's tooltip: the task id, and a TensorBoard's experiments and trials. */
  title: string;
}

/** Task states after which a notebook or TensorBoard is gone (its proxy no longer answers). */
const ENDED_TASK_STATES = new Set(['TERMINATED', 'COMPLETED', 'CANCELED', 'ERROR', 'DELETED']);

/** Control and invisible characters: bidi overrides and isolates, zero-width characters, line separators… */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/gu;
const SHORT_ESCAPES: Record<string, string> = { '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };

function escapeChar(ch: string): string {
  if (ch in SHORT_ESCAPES) {
    return SHORT_ESCAPES[ch];
  }
  const n = ch.codePointAt(0) ?? 0;
  const hex = n.toString(16);
  if (n < 0x100) {
    return `\\x${hex.padStart(2, '0')}`;
  }
  return n < 0x10000 ? `\\u${hex.padStart(4, '0')}` : `\\U${hex.padStart(8, '0')}`;
}

/**
 * `text` with every control or invisible character written as an escape (`\u202e`), as the det
 * CLI shows it: a name from the master cannot re-order or hide what the sidebar shows. (The
 * sidebar sets text with `textContent` only, so markup in a name is shown as typed.)
 */
export function visible(text: string): string {
  return text.replace(UNSAFE, escapeChar);
}

/** `STATE_RUNNING` → `RUNNING`, `TYPE_EXPERIMENT` → `EXPERIMENT`. */
export function stripPrefix(value: unknown, prefix: string): string {
  const s = typeof value === 'string' ? value : '';
  return s.startsWith(prefix) ? s.slice(prefix.length) : s;
}

/** 0.421 → `42%`; absent → empty. */
export function percent(value: unknown): string {
  if (typeof value !== 'number' || !isFinite(value)) {
    return '';
  }
  return `${Math.floor(Math.min(Math.max(value, 0), 1) * 100)}%`;
}

/** A metric with four significant digits (`0.1235`, `1.235e+5`); absent → empty. */
export function metric(value: unknown): string {
  if (typeof value !== 'number' || !isFinite(value)) {
    return '';
  }
  return Math.abs(value) >= 1e5 || (value !== 0 && Math.abs(value) < 1e-3)
    ? value.toExponential(3)
    : String(Number(value.toPrecision(4)));
}

export function experimentRows(body: any): ExperimentRow[] {
  const list: any[] = Array.isArray(body?.experiments) ? body.experiments : [];
  return list
    .map(e => ({
      id: Number(e.id),
      name: visible(String(e.name ?? '')),
      state: stripPrefix(e.state, 'STATE_'),
      progress: percent(e.progress),
      best: metric(e.bestTrialSearcherMetric),
      metric: visible(String(e.searcherMetric ?? ''))
    }))
    .sort((a, b) => b.id - a.id);
}

/** Jobs of one pool's queue, in queue order (position 1 runs or is next). */
export function jobRows(body: any): JobRow[] {
  const list: any[] = Array.isArray(body?.jobs) ? body.jobs : [];
  return list.map((item, i) => {
    const j = item?.full ?? item ?? {};
    const requested = Number(j.requestedSlots ?? 0);
    const allocated = Number(j.allocatedSlots ?? 0);
    const ahead = j.summary?.jobsAhead;
    let wait = '';
    if (j.waitReason) {
      wait = visible(String(j.waitReason));
    } else if (typeof ahead === 'number' && ahead > 0) {
      wait = `${ahead} job${ahead === 1 ? '' : 's'} ahead`;
    }
    return {
      position: i + 1,
      name: visible(String(j.name ?? j.jobId ?? '')),
      kind: stripPrefix(j.type, 'TYPE_'),
      state: stripPrefix(j.summary?.state, 'STATE_'),
      pool: visible(String(j.resourcePool ?? '')),
      slots: `${allocated}/${requested}`,
      wait
    };
  });
}

export function clusterView(body: any): ClusterView {
  const list: any[] = Array.isArray(body?.agents) ? body.agents : [];
  const agents = list.map(a => {
    const slots: any[] = Object.values(a.slots ?? {});
    return {
      id: visible(String(a.id)),
      pool: visible(String((a.resourcePools ?? [])[0] ?? '')),
      used: slots.filter(s => s && s.container).length,
      total: slots.length,
      enabled: a.enabled !== false
    };
  });
  return {
    agents,
    used: agents.reduce((n, a) => n + a.used, 0),
    total: agents.reduce((n, a) => n + a.total, 0)
  };
}

/** The code a notebook cell or console runs to describe an experiment. */
export function describeCode(id: number): string {
  return `%load_ext det_jupyter\n%det e describe ${id}`;
}

function taskList(body: any, key: string, kind: TaskKind): (TaskRow & { start: string })[] {
  const list: any[] = Array.isArray(body?.[key]) ? body[key] : [];
  return list
    .filter(t => t && typeof t.id === 'string' && t.id !== '')
    .map(t => {
      const ids = (name: string, v: unknown) =>
        Array.isArray(v) && v.length ? `; ${name} ${v.join(', ')}` : '';
      return {
        id: t.id,
        kind,
        description: visible(String(t.description ?? '')),
        state: stripPrefix(t.state, 'STATE_'),
        owner: String(t.username ?? ''),
        title: visible(
          `${kind} ${t.id}` + ids('experiments', t.experimentIds) + ids('trials', t.trialIds)
        ),
        start: String(t.startTime ?? '')
      };
    })
    .filter(t => !ENDED_TASK_STATES.has(t.state))
    .map(t => ({ ...t, state: t.state.toLowerCase() }))
    .sort((a, b) => (a.start < b.start ? 1 : a.start > b.start ? -1 : 0));
}

/**
 * The user's notebooks, then TensorBoards, that have not ended, newest first. `notebooks` is a
 * `GET /api/v1/notebooks` body, `tensorboards` a `GET /api/v1/tensorboards` body (`{}` where the
 * master has no such route). An admin's lists hold everyone's: only `username`'s are kept
 * (all of them when the username is unknown).
 */
export function taskRows(notebooks: any, tensorboards: any, username: string | null = null): TaskRow[] {
  return [
    ...taskList(notebooks, 'notebooks', 'notebook'),
    ...taskList(tensorboards, 'tensorboards', 'tensorboard')
  ]
    .filter(t => !username || !t.owner || t.owner === username)
    .map(({ start, ...row }) => row);
}

/** The det route whose answer carries a task's proxy ticket. */
export function taskPath(kind: TaskKind, id: string): string {
  return `api/v1/${kind}s/${encodeURIComponent(id)}`;
}

/**
 * Where the browser opens a task: its `proxyUrl` (the master's answer names the task's address
 * on the proxy's own origin, apart from the master's, so the task's pages cannot call the
 * master's API) or, from a master that gives none, `<baseUrl>proxy/<id>/`; with the ticket the
 * proxy trades for a cookie (it then redirects to the same address without it). A notebook
 * opens on JupyterLab (`lab`), a TensorBoard on its root.
 */
export function taskUrl(
  baseUrl: string,
  kind: TaskKind,
  id: string,
  ticket: string,
  proxyUrl: unknown = null
): string {
  const page = kind === 'notebook' ? 'lab' : '';
  let base: string;
  if (typeof proxyUrl === 'string' && /^https?:\/\/[^/]+\/proxy\//.test(proxyUrl)) {
    base = proxyUrl.endsWith('/') ? proxyUrl : `${proxyUrl}/`;
  } else {
    const root = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
    base = `${root}proxy/${encodeURIComponent(id)}/`;
  }
  return `${base}${page}?det_ticket=${encodeURIComponent(ticket)}`;
}
