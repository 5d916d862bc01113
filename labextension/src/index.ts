/**
 * det-jupyter's JupyterLab extension: a left-sidebar panel with the master's experiments,
 * jobs and cluster and the user's notebooks and TensorBoards; a command that describes an
 * experiment in a notebook or console; and the dashboard, main-area panels (experiments, an
 * experiment, a trial, experiments compared, the model registry) that a reload or a re-opened
 * Lab restores.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { WidgetTracker } from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { DetApi } from './api';
import { ComparePanel, compareId } from './dash_compare';
import { DashPanel, INavigator } from './dash_common';
import { ExperimentPanel } from './dash_experiment';
import { ExperimentsPanel } from './dash_experiments';
import { RegistryPanel } from './dash_registry';
import { TrialPanel } from './dash_trial';
import { describeCode } from './model';
import { DetSidebar } from './sidebar';

export const OPEN_EXPERIMENT = 'det-jupyter:open-experiment';
export const DASH_EXPERIMENTS = 'det-jupyter:dashboard-experiments';
export const DASH_EXPERIMENT = 'det-jupyter:dashboard-experiment';
export const DASH_TRIAL = 'det-jupyter:dashboard-trial';
export const DASH_REGISTRY = 'det-jupyter:dashboard-registry';
/** Experiments compared: `{ids: [1, 2]}` (or `"1,2"`). */
export const DASH_COMPARE = 'det-jupyter:dashboard-compare';
/** Reopens a restored panel: `{kind, id}` or `{kind: 'compare', ids}` (what the layout restorer stored). */
export const DASH_OPEN = 'det-jupyter:dashboard-open';

const detIcon = new LabIcon({
  name: 'det-jupyter:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<rect x="3" y="13" width="4" height="8" rx="1"/><rect x="10" y="8" width="4" height="13" rx="1"/>' +
    '<rect x="17" y="3" width="4" height="18" rx="1"/></g></svg>'
});

/** Interfaces of the console panel `console:create` returns (no build dependency on it). */
interface IConsolePanelLike extends Widget {
  sessionContext: { ready: Promise<void> };
  console: { inject(code: string): Promise<void> };
}

/**
 * Describe experiment `id`: in a new cell below the active one when a notebook is the current
 * document, else in a new Python console.
 */
async function openExperiment(app: JupyterFrontEnd, id: number): Promise<void> {
  const code = describeCode(id);
  const current = app.shell.currentWidget;
  if (current && current.hasClass('jp-NotebookPanel')) {
    // Run only once the kernel is up: a cell run while it starts is silently not executed.
    await (current as Widget & { sessionContext: { ready: Promise<void> } }).sessionContext.ready;
    await app.commands.execute('notebook:insert-cell-below');
    await app.commands.execute('notebook:replace-selection', { text: code });
    await app.commands.execute('notebook:run-cell');
    return;
  }
  const kernel = app.serviceManager.kernelspecs.specs?.default ?? 'python3';
  const panel = (await app.commands.execute('console:create', {
    activate: true,
    kernelPreference: { name: kernel }
  })) as IConsolePanelLike;
  await panel.sessionContext.ready;
  await panel.console.inject(code);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'det-jupyter:sidebar',
  description:
    "Experiments, jobs, the cluster and the user's notebooks and TensorBoards of the det-jupyter master, live.",
  autoStart: true,
  optional: [ILayoutRestorer, IRenderMimeRegistry],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null, rendermime: IRenderMimeRegistry | null) => {
    app.commands.addCommand(OPEN_EXPERIMENT, {
      label: args => (args.id === undefined ? 'Describe a det experiment' : `Describe experiment ${args.id}`),
      describedBy: {
        args: {
          type: 'object',
          properties: { id: { type: 'number', description: 'the experiment id' } },
          required: ['id']
        }
      },
      execute: async args => {
        const id = Number(args.id);
        if (!Number.isInteger(id) || id < 1) {
          throw new Error(`${OPEN_EXPERIMENT} needs an experiment id, got ${String(args.id)}`);
        }
        await openExperiment(app, id);
      }
    });

    const api = new DetApi();
    const nav: INavigator = {
      experiments: () => void app.commands.execute(DASH_EXPERIMENTS),
      experiment: id => void app.commands.execute(DASH_EXPERIMENT, { id }),
      trial: id => void app.commands.execute(DASH_TRIAL, { id }),
      registry: () => void app.commands.execute(DASH_REGISTRY),
      compare: ids => void app.commands.execute(DASH_COMPARE, { ids })
    };
    const tracker = new WidgetTracker<DashPanel>({ namespace: 'det-jupyter-dashboard' });
    /** Show the panel of id `id`, made by `make` unless it is open already. */
    const show = (id: string, make: () => DashPanel): DashPanel => {
      let panel = tracker.find(w => w.id === id);
      if (!panel) {
        panel = make();
        app.shell.add(panel, 'main');
        void tracker.add(panel);
      }
      app.shell.activateById(panel.id);
      return panel;
    };
    const idArg = (args: any, what: string): number => {
      const id = Number(args.id);
      if (!Number.isInteger(id) || id < 1) {
        throw new Error(`${what} needs an id, got ${String(args.id)}`);
      }
      return id;
    };
    app.commands.addCommand(DASH_EXPERIMENTS, {
      label: 'det: Experiments',
      caption: 'The experiments table of the det master',
      execute: () => show('det-dash-experiments', () => new ExperimentsPanel(api, nav))
    });
    app.commands.addCommand(DASH_EXPERIMENT, {
      label: args => (args.id === undefined ? 'det: Experiment' : `det: Experiment ${args.id}`),
      execute: args => {
        const id = idArg(args, DASH_EXPERIMENT);
        return show(`det-dash-experiment-${id}`, () => new ExperimentPanel(api, nav, id));
      }
    });
    app.commands.addCommand(DASH_TRIAL, {
      label: args => (args.id === undefined ? 'det: Trial' : `det: Trial ${args.id}`),
      execute: args => {
        const id = idArg(args, DASH_TRIAL);
        return show(`det-dash-trial-${id}`, () => new TrialPanel(api, nav, id));
      }
    });
    app.commands.addCommand(DASH_REGISTRY, {
      label: 'det: Model registry',
      execute: () => show('det-dash-registry', () => new RegistryPanel(api, nav))
    });
    app.commands.addCommand(DASH_COMPARE, {
      label: args => (args.ids === undefined ? 'det: Compare experiments' : `det: Compare experiments ${String(args.ids)}`),
      execute: args => {
        const raw = Array.isArray(args.ids) ? args.ids : String(args.ids ?? '').split(/[,-]/);
        const ids = [...new Set(raw.map(Number))];
        if (!ids.length || ids.some(id => !Number.isInteger(id) || id < 1)) {
          throw new Error(`${DASH_COMPARE} needs experiment ids, got ${String(args.ids)}`);
        }
        return show(compareId(ids), () => new ComparePanel(api, nav, ids));
      }
    });
    app.commands.addCommand(DASH_OPEN, {
      label: 'det: Open a dashboard panel',
      execute: args => {
        const command = { experiments: DASH_EXPERIMENTS, experiment: DASH_EXPERIMENT, trial: DASH_TRIAL,
          registry: DASH_REGISTRY, compare: DASH_COMPARE }[String(args.kind)];
        if (!command) {
          throw new Error(`${DASH_OPEN}: no dashboard panel of kind ${String(args.kind)}`);
        }
        if (command === DASH_COMPARE) {
          return app.commands.execute(command, { ids: args.ids ?? null });
        }
        return app.commands.execute(command, args.id === undefined ? {} : { id: args.id });
      }
    });
    if (restorer) {
      // The panel's id says what it shows: det-dash-<kind>[-<id>], det-dash-compare-<id>-<id>….
      void restorer.restore(tracker, {
        command: DASH_OPEN,
        args: (panel: DashPanel) => {
          const compared = panel.id.match(/^det-dash-compare-([\d-]+)$/);
          if (compared) {
            return { kind: 'compare', ids: compared[1] };
          }
          const [, kind, id] = panel.id.match(/^det-dash-([a-z]+)(?:-(\d+))?$/) ?? [];
          return id ? { kind, id: Number(id) } : { kind };
        },
        name: (panel: DashPanel) => panel.id
      });
    }

    // `%det dashboard …` outputs this MIME type: a button that opens the panel it names.
    rendermime?.addFactory({
      safe: true,
      mimeTypes: [DASHBOARD_MIME],
      defaultRank: 10,
      createRenderer: () => new DashboardLink(args => void app.commands.execute(DASH_OPEN, args))
    });

    const sidebar = new DetSidebar({
      api,
      openExperiment: id => void app.commands.execute(OPEN_EXPERIMENT, { id }),
      openDashboard: nav
    });
    sidebar.title.icon = detIcon;
    sidebar.title.caption = 'det-jupyter';
    app.shell.add(sidebar, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }
  }
};

/** What `%det dashboard` returns: `{kind, id?}` of a dashboard panel. */
export const DASHBOARD_MIME = 'application/vnd.det-jupyter.dashboard+json';

class DashboardLink extends Widget {
  constructor(private readonly _open: (args: { kind: string; id?: number }) => void) {
    super();
    this.addClass('det-DashboardLink');
  }

  async renderModel(model: { data: Record<string, unknown> }): Promise<void> {
    const data = (model.data[DASHBOARD_MIME] ?? {}) as { kind?: unknown; id?: unknown };
    const kind = String(data.kind ?? 'experiments');
    const id = typeof data.id === 'number' ? data.id : undefined;
    const button = document.createElement('button');
    button.className = 'jp-mod-styled jp-mod-accept';
    button.dataset.det = 'open-dashboard';
    button.textContent = `Open ${kind}${id === undefined ? '' : ` ${id}`} in the det dashboard`;
    button.addEventListener('click', () => this._open(id === undefined ? { kind } : { kind, id }));
    this.node.replaceChildren(button);
  }
}

export default plugin;
