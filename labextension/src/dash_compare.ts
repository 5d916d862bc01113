/**
 * Several experiments side by side: the curves of one chosen metric of all their trials on
 * one chart (`GET /api/v1/trials/time-series`, as an experiment's page draws them; a series
 * per trial, named `exp N / trial M`), and a table of each experiment's searcher, best metric
 * and its best trial's hyperparameters. Opened from the experiments table's Compare button.
 */

import { DetApi } from './api';
import { Chart, IPanel } from './charts';
import { IColumn, INavigator, DashPanel, flatten, h, hpText, metricNames, num, select, state, table, TERMINAL, trialSeries } from './dash_common';


/** The panel's id for a set of experiments (what a reload restores it from). */
export function compareId(ids: number[]): string {
  return `det-dash-compare-${[...ids].sort((a, b) => a - b).join('-')}`;
}

export class ComparePanel extends DashPanel {
  constructor(api: DetApi, nav: INavigator, readonly experimentIds: number[]) {
    super(api, nav, 5000);
    this.experimentIds = [...experimentIds].sort((a, b) => a - b);
    this.id = compareId(this.experimentIds);
    this.title.label = `det: compare ${this.experimentIds.join(', ')}`;
    this.addClass('det-Dash-compare');
    this._controls = h('div', { className: 'det-Dash-toolbar' });
    const curves = h('div', { className: 'det-Dash-chart', 'data-det': 'compare-curves' });
    this._curves = new Chart(curves, api.url('det-jupyter/chart.js'), 'lines', 360);
    this._table = h('div', { className: 'det-Dash-scroll', 'data-det': 'compare-table' });
    this.body.append(h('h2', {}, `Experiments ${this.experimentIds.join(', ')}`), this._controls, curves,
      this._table);
  }

  protected async load(): Promise<any> {
    const experiments = await Promise.all(this.experimentIds.map(async id => {
      const [e, t] = await Promise.all([
        this.api.get(`api/v1/experiments/${id}`),
        this.api.get(`api/v1/experiments/${id}/trials?limit=1000`)
      ]);
      return { exp: e.experiment, trials: (t.trials ?? []) as any[] };
    }));
    const trials = experiments.flatMap(e => e.trials);
    const names = metricNames(trials);
    if (!this._metric || !names.includes(this._metric)) {
      const first = `validation.${experiments[0]?.exp.config?.searcher?.metric ?? ''}`;
      this._metric = names.includes(first) ? first : names[0] ?? '';
    }
    const series = this._metric ? await trialSeries(this.api, trials, this._metric) : new Map<number, any[]>();
    return { experiments, names, series };
  }

  protected live(data: any): boolean {
    return data.experiments.some((e: any) => !TERMINAL.has(e.exp.state));
  }

  protected render(data: any): void {
    const { experiments, names, series } = data;
    if (this._controls.dataset.names !== names.join('\n')) {
      this._controls.dataset.names = names.join('\n');
      this._controls.replaceChildren(h('label', {}, 'metric ', select(names.map((n: string) => [n, n]), this._metric,
        v => {
          this._metric = v;
          void this.refresh();
        }, { 'data-det': 'compare-metric' })));
    }
    const name = this._metric.split('.').slice(1).join('.');
    let color = 0;
    const lines = experiments.flatMap((e: any) => e.trials.map((t: any) => {
      const points: any[] = series.get(Number(t.id)) ?? [];
      return {
        name: `exp ${e.exp.id} / trial ${t.id}`, mode: 'lines' as const, color: color++,
        x: points.map(p => p.batches),
        y: points.map(p => {
          const v = p.values?.[name];
          return typeof v === 'number' && Number.isFinite(v) ? v : null;
        })
      };
    }));
    const panel: IPanel = {
      title: this._metric || 'no metrics yet', xlabel: 'batches', ylabel: name, empty: 'no metrics yet', series: lines
    };
    void this._curves.setPanels([panel]);
    const columns: IColumn<any>[] = [
      { key: 'id', label: 'Experiment', cell: e => String(e.exp.id), numeric: true },
      { key: 'name', label: 'Name', cell: e => String(e.exp.name ?? '') },
      { key: 'state', label: 'State', cell: e => state(e.exp.state) },
      { key: 'searcher', label: 'Searcher', cell: e => searcherText(e.exp.config?.searcher ?? {}) },
      { key: 'trials', label: 'Trials', cell: e => String(e.trials.length), numeric: true },
      { key: 'best-trial', label: 'Best trial', cell: e => String(e.exp.bestTrialId ?? ''), numeric: true },
      { key: 'best', label: 'Best metric', cell: e => num(e.exp.bestTrialSearcherMetric), numeric: true },
      {
        key: 'hparams', label: "Best trial's hyperparameters", cell: e => {
          const best = e.trials.find((t: any) => Number(t.id) === Number(e.exp.bestTrialId));
          return best ? Object.entries(flatten(best.hparams ?? {})).map(([k, v]) => `${k}=${hpText(v)}`).join(' ') : '';
        }
      }
    ];
    this._table.replaceChildren(table(columns, experiments, e => this.nav.experiment(Number(e.exp.id)),
      e => String(e.exp.id)));
  }

  dispose(): void {
    this._curves.dispose();
    super.dispose();
  }

  private _controls: HTMLElement;
  private _curves: Chart;
  private _table: HTMLElement;
  private _metric = '';
}

/** `adaptive_asha on validation_loss (smaller is better)`. */
function searcherText(searcher: any): string {
  if (!searcher.name) {
    return '';
  }
  const direction = searcher.smaller_is_better === false ? 'bigger' : 'smaller';
  return searcher.metric ? `${searcher.name} on ${searcher.metric} (${direction} is better)` : String(searcher.name);
}
