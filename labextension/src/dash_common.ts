/**
 * What the dashboard's main-area panels share: a base panel that polls the master while it
 * is shown, DOM helpers that only ever set text (never markup from the master), tables,
 * an inline confirmation, and formatting.
 */

import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ApiError, AuthRequired, DetApi } from './api';
import { visible } from './model';

/** How panels open each other (commands of the extension, so the layout restorer knows them). */
export interface INavigator {
  experiments(): void;
  experiment(id: number): void;
  trial(id: number): void;
  registry(): void;
  /** Experiments side by side (dash_compare.ts). */
  compare(ids: number[]): void;
}

type Attrs = Record<string, string | number | boolean | undefined>;

/** An element with attributes and children; strings become text nodes (never markup). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) {
      continue;
    }
    if (k === 'className') {
      node.className = String(v);
    } else {
      node.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(typeof child === 'string' ? visible(child) : child);
    }
  }
  return node;
}

/** `nodes` without the nulls (for `replaceChildren` with optional parts). */
export function present(...nodes: (Node | string | null | undefined)[]): (Node | string)[] {
  return nodes.filter((n): n is Node | string => n !== null && n !== undefined);
}

export function button(label: string, onClick: () => void, attrs: Attrs = {}): HTMLButtonElement {
  const b = h('button', { className: 'jp-mod-styled det-Dash-button', type: 'button', ...attrs }, label);
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

export function select(options: [string, string][], value: string, onChange: (v: string) => void,
                       attrs: Attrs = {}): HTMLSelectElement {
  const s = h('select', { className: 'jp-mod-styled det-Dash-select', ...attrs });
  for (const [v, label] of options) {
    const o = h('option', { value: v }, label);
    o.selected = v === value;
    s.append(o);
  }
  s.addEventListener('change', () => onChange(s.value));
  return s;
}

export interface IColumn<R> {
  key: string;
  label: string;
  cell: (row: R) => string | Node;
  numeric?: boolean;
}

/** A table of `rows`; `onRow` makes rows clickable (and keyboard-activated). */
export function table<R>(columns: IColumn<R>[], rows: R[], onRow?: (row: R) => void,
                         rowKey?: (row: R) => string): HTMLTableElement {
  const t = h('table', { className: 'det-Dash-table' });
  const head = t.createTHead().insertRow();
  for (const c of columns) {
    head.append(h('th', { className: c.numeric ? 'det-mod-numeric' : '', 'data-col': c.key }, c.label));
  }
  const body = t.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    if (rowKey) {
      tr.dataset.key = rowKey(r);
    }
    for (const c of columns) {
      const value = c.cell(r);
      const td = tr.insertCell();
      td.dataset.col = c.key;
      if (c.numeric) {
        td.className = 'det-mod-numeric';
      }
      if (typeof value === 'string') {
        td.textContent = visible(value);
        td.title = visible(value);
      } else {
        td.append(value);
      }
    }
    if (onRow) {
      tr.classList.add('det-mod-clickable');
      tr.tabIndex = 0;
      tr.addEventListener('click', event => {
        const target = event.target as HTMLElement;
        if (target.closest('button, input, select, a')) {
          return; // a control in the row does its own thing
        }
        onRow(r);
      });
      tr.addEventListener('keydown', event => {
        if (event.target === tr && (event.key === 'Enter' || event.key === ' ')) {
          event.preventDefault();
          onRow(r);
        }
      });
    }
  }
  return t;
}

export function num(value: unknown, digits = 4): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return '';
  }
  const a = Math.abs(value);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) {
    return value.toExponential(2);
  }
  return String(Number(value.toPrecision(digits)));
}

export function state(value: unknown): string {
  return String(value ?? '').replace(/^STATE_/, '');
}

export function when(value: unknown): string {
  if (typeof value !== 'string' || !value) {
    return '';
  }
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? value : d.toLocaleString();
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError || err instanceof AuthRequired || err instanceof Error) {
    return err.message;
  }
  return String(err);
}

/** A hyperparameter value as text (nested values as JSON). */
export function hpText(value: unknown): string {
  if (typeof value === 'number') {
    return num(value);
  }
  if (typeof value === 'string') {
    return value;
  }
  return JSON.stringify(value);
}

/** `training.loss`, `validation.accuracy`, … of the trials' summaries, validation first. */
export function metricNames(trials: any[]): string[] {
  const out = new Set<string>();
  for (const [group, key] of [['validation', 'validation_metrics'], ['training', 'avg_metrics']]) {
    for (const t of trials) {
      for (const [name, s] of Object.entries<any>(t.summaryMetrics?.[key] ?? {})) {
        if (!s || s.type === undefined || s.type === 'number') {
          out.add(`${group}.${name}`);
        }
      }
    }
  }
  return [...out];
}

/** `{a: {b: 1}}` → `{"a.b": 1}`. */
/** Points the curves of all trials may hold in all (the master thins each trial to its share). */
const POINT_BUDGET = 40000;
const IDS_PER_CALL = 500; // the time-series route's limit
export const TERMINAL = new Set(['STATE_COMPLETED', 'STATE_CANCELED', 'STATE_ERROR', 'STATE_DELETED']);

/**
 * Each trial's points of `metric` (`GET /api/v1/trials/time-series`, downsampled by the master
 * to the trials' share of POINT_BUDGET, at most 1,000 each), keyed by trial id.
 */
export async function trialSeries(api: DetApi, trials: any[], metric: string): Promise<Map<number, any[]>> {
  const out = new Map<number, any[]>();
  if (!trials.length) {
    return out;
  }
  const perTrial = Math.max(20, Math.min(1000, Math.floor(POINT_BUDGET / trials.length)));
  for (let i = 0; i < trials.length; i += IDS_PER_CALL) {
    const q = new URLSearchParams({ maxDatapoints: String(perTrial) });
    q.append('metricIds', metric);
    for (const t of trials.slice(i, i + IDS_PER_CALL)) {
      q.append('trialIds', String(t.id));
    }
    const body = await api.get(`api/v1/trials/time-series?${q}`);
    for (const entry of body.trials ?? []) {
      out.set(Number(entry.trial?.id), (entry.metrics ?? []).flatMap((m: any) => m.data ?? []));
    }
  }
  return out;
}

export function flatten(value: Record<string, unknown>, prefix = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value ?? {})) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      Object.assign(out, flatten(v as Record<string, unknown>, `${prefix}${k}.`));
    } else {
      out[`${prefix}${k}`] = v;
    }
  }
  return out;
}

/**
 * A main-area panel that shows what `load()` fetched through `render()`, every `interval`
 * ms while it is attached and `live()` says more can change. Failures show in its status
 * line; a gone session asks to log in through the sidebar.
 */
export abstract class DashPanel extends Widget {
  constructor(protected readonly api: DetApi, protected readonly nav: INavigator,
              private readonly _interval = 3000) {
    super();
    this.addClass('det-Dash');
    this.status = h('div', { className: 'det-Dash-status', role: 'status' });
    this.confirmBar = h('div', { className: 'det-Dash-confirm', hidden: true });
    this.body = h('div', { className: 'det-Dash-body' });
    this.node.append(this.confirmBar, this.status, this.body);
    this.title.closable = true;
  }

  /** Fetch now and show it. */
  async refresh(): Promise<void> {
    try {
      if (!(await this.api.connect())) {
        throw new AuthRequired('log in to the det master in the det-jupyter sidebar first');
      }
      const data = await this.load();
      this.render(data);
      this.setStatus('');
      this._live = this.live(data);
    } catch (err) {
      this.setStatus(errorText(err), true);
    }
  }

  setStatus(text: string, isError = false): void {
    this.status.textContent = visible(text);
    this.status.classList.toggle('det-mod-error', isError);
  }

  /** Ask before `action`: a bar with `question`, a `yes` button and Cancel. */
  ask(question: string, yes: string, action: () => Promise<void>): void {
    const go = button(yes, () => {
      this.confirmBar.hidden = true;
      void action().then(() => this.refresh(), err => this.setStatus(errorText(err), true));
    }, { 'data-det': 'confirm-yes' });
    go.classList.add('jp-mod-warn');
    const cancel = button('Cancel', () => {
      this.confirmBar.hidden = true;
    }, { 'data-det': 'confirm-cancel' });
    this.confirmBar.replaceChildren(h('span', {}, question), go, cancel);
    this.confirmBar.hidden = false;
  }

  protected abstract load(): Promise<any>;
  protected abstract render(data: any): void;
  /** Whether what `data` shows can still change (keep polling). */
  protected live(_data: any): boolean {
    return true;
  }

  protected onAfterAttach(): void {
    void this.refresh();
    this._timer = window.setInterval(() => {
      if (this._live && this.isVisible && !this._busy) {
        this._busy = true;
        void this.refresh().finally(() => {
          this._busy = false;
        });
      }
    }, this._interval);
  }

  protected onBeforeDetach(): void {
    window.clearInterval(this._timer);
  }

  /** A closed tab is gone for good (the tracker forgets it; opening it again makes a new one). */
  protected onCloseRequest(msg: Message): void {
    super.onCloseRequest(msg);
    this.dispose();
  }

  protected status: HTMLElement;
  protected confirmBar: HTMLElement;
  protected body: HTMLElement;
  private _timer = 0;
  private _live = true;
  private _busy = false;
}
