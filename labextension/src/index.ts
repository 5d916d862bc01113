/**
 * det-jupyter's JupyterLab extension: a left-sidebar panel with the master's experiments,
 * jobs and cluster and the user's notebooks and TensorBoards, and a command that describes an
 * experiment in a notebook or console.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { DetApi } from './api';
import { describeCode } from './model';
import { DetSidebar } from './sidebar';

export const OPEN_EXPERIMENT = 'det-jupyter:open-experiment';

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
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
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

    const sidebar = new DetSidebar({
      api: new DetApi(),
      openExperiment: id => void app.commands.execute(OPEN_EXPERIMENT, { id })
    });
    sidebar.title.icon = detIcon;
    sidebar.title.caption = 'det-jupyter';
    app.shell.add(sidebar, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }
  }
};

export default plugin;
