/**
 * The model registry: models (filter, archived too), a model's versions and its notes and
 * metadata (edited here: `PATCH /api/v1/models/{name}`, metadata as a whole), creating a model, registering a checkpoint as a new version, archive (after a confirmation)
 * and unarchive.
 */

import { DetApi } from './api';
import { INavigator, DashPanel, button, h, present, table, when } from './dash_common';

export class RegistryPanel extends DashPanel {
  constructor(api: DetApi, nav: INavigator) {
    super(api, nav, 5000);
    this.id = 'det-dash-registry';
    this.title.label = 'det: model registry';
    this.addClass('det-Dash-registry');
    this._filter = h('input', { className: 'jp-mod-styled', placeholder: 'filter models', 'data-det': 'model-filter' });
    this._filter.addEventListener('input', () => this._data && this.render(this._data));
    const archived = h('input', { type: 'checkbox' });
    archived.addEventListener('change', () => {
      this._archived = archived.checked;
      void this.refresh();
    });
    const name = h('input', { className: 'jp-mod-styled', placeholder: 'new model name', 'data-det': 'new-model' });
    const create = button('Create model', () => void this._run(async () => {
      await this.api.send('POST', 'api/v1/models', { name: name.value.trim() });
      this._chosen = name.value.trim();
      name.value = '';
    }), { 'data-det': 'create-model' });
    this._models = h('div', { className: 'det-Dash-scroll' });
    this._detail = h('div', { className: 'det-Dash-model' });
    this.body.append(h('div', { className: 'det-Dash-toolbar' }, this._filter, h('label', {}, archived, ' archived too'), name, create),
      this._models, this._detail);
  }

  protected async load(): Promise<any> {
    const models = (await this.api.get(`api/v1/models?limit=500${this._archived ? '' : '&archived=false'}`)).models ?? [];
    let versions: any[] = [];
    if (this._chosen && models.some((m: any) => m.name === this._chosen)) {
      versions = (await this.api.get(`api/v1/models/${encodeURIComponent(this._chosen)}/versions?limit=500`)).modelVersions ?? [];
    }
    return { models, versions };
  }

  protected render(data: any): void {
    this._data = data;
    const text = this._filter.value.toLowerCase();
    const models = data.models.filter((m: any) => !text || `${m.name} ${m.description ?? ''} ${(m.labels ?? []).join(' ')}`.toLowerCase().includes(text));
    this._models.replaceChildren(models.length ? table([
      { key: 'name', label: 'Model', cell: (m: any) => String(m.name) },
      { key: 'description', label: 'Description', cell: (m: any) => String(m.description ?? '') },
      { key: 'versions', label: 'Versions', cell: (m: any) => String(m.numVersions ?? 0), numeric: true },
      { key: 'labels', label: 'Labels', cell: (m: any) => (m.labels ?? []).join(', ') },
      { key: 'updated', label: 'Updated', cell: (m: any) => when(m.lastUpdatedTime) },
      { key: 'archived', label: 'Archived', cell: (m: any) => m.archived ? 'yes' : '' }
    ], models, m => {
      this._chosen = String(m.name);
      void this.refresh();
    }, m => String(m.name)) : h('p', { className: 'det-Dash-empty' }, 'No models.'));
    const model = data.models.find((m: any) => m.name === this._chosen);
    if (!model) {
      this._detail.replaceChildren();
      this._detailKey = '';
      return;
    }
    // Redrawn only when what it shows changed: a poll must not move the focus out of a field
    // being typed in (the checkpoint UUID, the notes, a metadata row).
    const detailKey = JSON.stringify([model, data.versions]);
    if (detailKey === this._detailKey) {
      return;
    }
    this._detailKey = detailKey;
    const uuid = h('input', { className: 'jp-mod-styled', placeholder: 'checkpoint UUID', size: 38, 'data-det': 'register-uuid' });
    this._detail.replaceChildren(...present(
      h('h3', {}, `Model ${model.name}`),
      h('div', {}, String(model.description ?? '')),
      this._editor(model),
      h('div', { className: 'det-Dash-actions' }, uuid,
        button('Register version', () => void this._run(async () => {
          await this.api.send('POST', `api/v1/models/${encodeURIComponent(model.name)}/versions`,
            { checkpointUuid: uuid.value.trim(), modelName: model.name });
        }), { 'data-det': 'register-version', disabled: !!model.archived }),
        model.archived
          ? button('Unarchive', () => void this._run(() => this.api.send('POST', `api/v1/models/${encodeURIComponent(model.name)}/unarchive`)))
          : button('Archive', () => this.ask(`Archive model ${model.name}? It takes no new versions until unarchived.`, 'Yes, archive',
            () => this.api.send('POST', `api/v1/models/${encodeURIComponent(model.name)}/archive`)), { 'data-det': 'archive' })),
      data.versions.length ? table([
        { key: 'version', label: 'Version', cell: (v: any) => String(v.version), numeric: true },
        { key: 'uuid', label: 'Checkpoint', cell: (v: any) => String(v.checkpoint?.uuid ?? '') },
        { key: 'trial', label: 'Trial', cell: (v: any) => String(v.checkpoint?.trialId ?? ''), numeric: true },
        { key: 'name', label: 'Name', cell: (v: any) => String(v.name ?? '') },
        { key: 'comment', label: 'Comment', cell: (v: any) => String(v.comment ?? '') },
        { key: 'notes', label: 'Notes', cell: (v: any) => String(v.notes ?? '') },
        { key: 'created', label: 'Created', cell: (v: any) => when(v.creationTime) }
      ], [...data.versions].sort((a, b) => b.version - a.version), v => {
        if (v.checkpoint?.trialId) {
          this.nav.trial(Number(v.checkpoint.trialId));
        }
      }, v => String(v.version)) : h('p', { className: 'det-Dash-empty' }, 'No versions yet.')));
  }

  /**
   * The model's notes and metadata, editable. Each part is kept across polls while the same
   * model's saved value of it is unchanged: a poll, or saving the other part, must not throw
   * away what is being typed.
   */
  private _editor(model: any): HTMLElement {
    const path = `api/v1/models/${encodeURIComponent(model.name)}`;
    const readOnly = !!model.archived;
    const notesKey = JSON.stringify([model.name, model.notes ?? '', readOnly]);
    if (this._notesKey !== notesKey || !this._notesNode) {
      this._notesKey = notesKey;
      const notes = h('textarea', { className: 'jp-mod-styled det-Dash-notes', rows: 5, 'data-det': 'model-notes',
        placeholder: 'notes (Markdown)' });
      notes.value = String(model.notes ?? '');
      this._notesNode = h('div', {}, h('h4', {}, 'Notes'), notes,
        h('div', { className: 'det-Dash-actions' },
          button('Save notes', () => void this._run(() => this.api.send('PATCH', path, { notes: notes.value })),
            { 'data-det': 'save-notes', disabled: readOnly })));
    }
    const metaKey = JSON.stringify([model.name, model.metadata ?? {}, readOnly]);
    if (this._metaKey !== metaKey || !this._metaNode) {
      this._metaKey = metaKey;
      this._metaNode = this._metadataEditor(model.metadata ?? {}, path, readOnly);
    }
    return h('div', { className: 'det-Dash-model-edit' }, this._notesNode, this._metaNode);
  }

  /** Key / value rows of `saved`; Save sends them all (`PATCH` replaces the whole metadata). */
  private _metadataEditor(saved: Record<string, unknown>, path: string, readOnly: boolean): HTMLElement {
    const rows = h('div', { className: 'det-Dash-metadata', 'data-det': 'model-metadata' });
    const addRow = (k: string, v: unknown): void => {
      const keyInput = h('input', { className: 'jp-mod-styled', placeholder: 'key', 'data-det': 'metadata-key' });
      keyInput.value = k;
      const valueInput = h('input', { className: 'jp-mod-styled', placeholder: 'value', size: 40, 'data-det': 'metadata-value' });
      // A value that is not a string shows (and is saved back) as JSON.
      valueInput.value = typeof v === 'string' ? v : JSON.stringify(v);
      const row = h('div', { className: 'det-Dash-metadata-row' }, keyInput, valueInput);
      if (typeof v !== 'string') {
        row.dataset.json = 'true';
      }
      row.append(button('Remove', () => row.remove(), { 'data-det': 'metadata-remove', disabled: readOnly }));
      rows.append(row);
    };
    for (const [k, v] of Object.entries<unknown>(saved)) {
      addRow(k, v);
    }
    const metadata = (): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      for (const row of Array.from(rows.querySelectorAll<HTMLElement>('.det-Dash-metadata-row'))) {
        const [k, v] = Array.from(row.querySelectorAll('input')).map(i => i.value);
        if (!k.trim()) {
          continue;
        }
        let value: unknown = v;
        if (row.dataset.json) {
          try {
            value = JSON.parse(v);
          } catch {
            value = v; // edited into something that is not JSON: a string
          }
        }
        out[k.trim()] = value;
      }
      return out;
    };
    return h('div', {}, h('h4', {}, 'Metadata'), rows,
      h('div', { className: 'det-Dash-actions' },
        button('Add', () => addRow('', ''), { 'data-det': 'metadata-add', disabled: readOnly }),
        button('Save metadata', () => void this._run(() => this.api.send('PATCH', path, { metadata: metadata() })),
          { 'data-det': 'save-metadata', disabled: readOnly })));
  }

  private async _run(action: () => Promise<unknown>): Promise<void> {
    try {
      await action();
      await this.refresh();
    } catch (err) {
      this.setStatus(err instanceof Error ? err.message : String(err), true);
    }
  }

  private _filter: HTMLInputElement;
  private _archived = false;
  private _chosen = '';
  private _models: HTMLElement;
  private _detail: HTMLElement;
  private _data: any = null;
  private _detailKey = '';
  private _notesKey = '';
  private _notesNode: HTMLElement | null = null;
  private _metaKey = '';
  private _metaNode: HTMLElement | null = null;
}
