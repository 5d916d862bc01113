/**
 * The dashboard's charts: the same module that draws the notebook widgets' charts
 * (det_jupyter/widgets/static/chart.js, served by the master at `det-jupyter/chart.js`),
 * fed through a small stand-in for an anywidget model. One implementation of every chart, so
 * the dashboard and the widgets look and behave alike (theme colours, log toggle, hover).
 */

export interface ISeries {
  name: string;
  x: (number | null)[];
  y: (number | null)[];
  mode?: 'lines' | 'markers' | 'lines+markers';
  color?: number;
}

export interface IPanel {
  title: string;
  xlabel?: string;
  ylabel?: string;
  empty?: string;
  series: ISeries[];
}

export interface ICoords {
  title: string;
  dimensions: { label: string; values: (number | null)[]; ticktext?: string[] }[];
  trial_ids: number[];
  color: (number | null)[];
  colorLabel: string;
  empty?: string;
}

export interface IContour {
  title: string;
  xlabel: string;
  ylabel: string;
  zlabel: string;
  x: (number | null)[];
  y: (number | null)[];
  z: (number | null)[];
  trial_ids: number[];
  empty?: string;
}

type Listener = () => void;

/** What chart.js reads of an anywidget model: `get` and `on('change:x')`. */
class StaticModel {
  get(name: string): unknown {
    return this._values[name];
  }

  on(event: string, listener: Listener): void {
    (this._listeners[event] ??= []).push(listener);
  }

  set(name: string, value: unknown): void {
    this._values[name] = value;
    for (const listener of this._listeners[`change:${name}`] ?? []) {
      listener();
    }
  }

  private _values: Record<string, unknown> = {};
  private _listeners: Record<string, Listener[]> = {};
}

let chartModule: Promise<any> | null = null;

function loadChartModule(url: string): Promise<any> {
  if (chartModule === null) {
    chartModule = import(/* webpackIgnore: true */ url).catch(err => {
      chartModule = null; // try again next time
      throw err;
    });
  }
  return chartModule;
}

/** A chart in `host`: line panels, parallel coordinates or a contour, redrawn on each `set…`. */
export class Chart {
  constructor(
    readonly host: HTMLElement,
    private readonly _moduleUrl: string,
    kind: 'lines' | 'parcoords' | 'contour',
    height: number
  ) {
    this._model.set('kind', kind);
    this._model.set('height', height);
    this._model.set('panels', []);
    this._model.set('coords', {});
    void loadChartModule(_moduleUrl).catch(() => undefined); // fetched while the data loads
  }

  setPanels(panels: IPanel[]): Promise<void> {
    this._model.set('panels', panels);
    return this._mount();
  }

  setCoords(coords: ICoords | IContour): Promise<void> {
    this._model.set('coords', coords);
    return this._mount();
  }

  dispose(): void {
    this._cleanup?.();
    this._cleanup = null;
  }

  private async _mount(): Promise<void> {
    if (this._mounted) {
      return;
    }
    this._mounted = true;
    const mod = await loadChartModule(this._moduleUrl);
    const result = mod.default.render({ model: this._model, el: this.host });
    this._cleanup = typeof result === 'function' ? result : null;
  }

  private _model = new StaticModel();
  private _mounted = false;
  private _cleanup: (() => void) | null = null;
}

/** An exponential moving average of `y` (`weight` 0: none), gaps kept as gaps. */
export function smooth(y: (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) {
    return y;
  }
  let last: number | null = null;
  return y.map(v => {
    if (v === null || !Number.isFinite(v)) {
      return null;
    }
    last = last === null ? v : last * weight + v * (1 - weight);
    return last;
  });
}
