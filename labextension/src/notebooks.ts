/**
 * The notebooks open in this JupyterLab, as Betty needs to know them: the server hears which
 * are open (every few seconds and whenever one opens or closes), so no Betty process rewrites
 * their files meanwhile; Betty's status goes into the open document instead, and the person's
 * next save (or autosave) writes it together with their own edits, with no "File Changed"
 * dialog. With jupyter-collaboration the open document is the shared one, so every tab on it
 * shows the status at once and the collaboration server saves it.
 */
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { Contents } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import type { Widget } from '@lumino/widgets';

import { BettyAPI } from './api';
import { ICellChangeJson } from './contract/serverApi';
import { INotebookStatus } from './models';

/** How often the panel renews its word that a notebook is open (the server's lease lasts 30 s). */
export const RENEW_MS = 10_000;

/** How often the panel speaks while the agent works (an approved cell change is waiting for it). */
export const HURRY_MS = 1_000;

/** The tag of Betty's status cell: its output is the only part of a notebook Betty writes. */
export const STATUS_TAG = 'betty-status';

/** One output of a cell, as nbformat has it (only what Betty reads). */
export interface IOutput {
  output_type: string;
  name?: string;
  text?: string | string[];
}

/**
 * What Betty uses of JupyterLab's notebook model (`INotebookModel`, its cells' `ICodeCellModel`):
 * outputs change through the cell's own output model, as a kernel's do, so the view, the
 * document and its next save agree.
 */
export interface INotebookCells {
  readonly cells: {
    readonly length: number;
    get(index: number): {
      readonly type: string;
      getMetadata(key: string): unknown;
      readonly outputs?: {
        readonly length: number;
        get(index: number): { toJSON(): IOutput };
        clear(): void;
        add(output: IOutput): number;
      };
    };
  };
}

/** A notebook open in a JupyterLab tab. */
export interface IOpenNotebook {
  /** Its path from Jupyter's root. */
  readonly path: string;
  /** Its tab. */
  readonly widget: Widget;
  /** Its document, once loaded (null while it loads). */
  readonly notebook: INotebookCells | null;
  /** Mark it as changed since its last save. */
  markChanged(): void;
  /**
   * Load it again when its file changed after the tab read it and the person has not edited it
   * yet (a watcher wrote it in the moment before this page held it open).
   */
  reloadIfChanged(contents: Contents.IManager): Promise<void>;
}

type Context = DocumentRegistry.IContext<DocumentRegistry.IModel>;

/** The notebooks among `widgets` (the main area's), each once per tab. */
export function openNotebooks(widgets: Iterable<Widget>): IOpenNotebook[] {
  const open: IOpenNotebook[] = [];
  for (const widget of widgets) {
    const context = (widget as { context?: Context }).context;
    if (typeof context?.path !== 'string' || !context.path.endsWith('.ipynb')) {
      continue;
    }
    const model = context.isReady ? (context.model as unknown as Partial<INotebookCells>) : null;
    open.push({
      path: context.path,
      widget,
      notebook: typeof model?.cells?.get === 'function' ? (model as INotebookCells) : null,
      markChanged: () => {
        context.model.dirty = true;
      },
      reloadIfChanged: async contents => {
        const disk = await contents.get(context.path, { content: false });
        if (!context.model.dirty && disk.last_modified !== context.contentsModel?.last_modified) {
          await context.revert();
        }
      }
    });
  }
  return open;
}

/**
 * Put Betty's status line into the status cells of `notebook`, unless a cell already shows the
 * job's state (the person ran it, or Betty wrote it); returns whether anything changed.
 */
export function putStatus(notebook: INotebookCells, status: INotebookStatus): boolean {
  let changed = false;
  for (let index = 0; index < notebook.cells.length; index++) {
    const cell = notebook.cells.get(index);
    const tags = cell.getMetadata('tags');
    if (cell.type !== 'code' || !cell.outputs || !Array.isArray(tags) || !tags.includes(STATUS_TAG)) {
      continue;
    }
    const outputs = Array.from({ length: cell.outputs.length }, (_, i) => cell.outputs!.get(i).toJSON());
    if (!showsState(outputs, status)) {
      cell.outputs.clear();
      cell.outputs.add({ output_type: 'stream', name: 'stdout', text: `${status.status}\n` });
      changed = true;
    }
  }
  return changed;
}

/** Whether the first line of `outputs` says the job is in `status.state` (Betty's line or the cell's own). */
export function showsState(outputs: IOutput[], status: INotebookStatus): boolean {
  const first = outputs.find(output => output.output_type === 'stream');
  const text = Array.isArray(first?.text) ? first!.text.join('') : first?.text ?? '';
  const said = text.trim().split('\n')[0].match(/^job (\S+) .*?: ([A-Z_]+)(?:\s|$)/);
  return said !== null && said[1] === status.job_id && said[2] === status.state;
}

/** Applies one approved cell change to the open notebook in `widget`; says how it went. */
export type ChangeApplier = (widget: Widget, change: ICellChangeJson) => Promise<string>;

/**
 * Tells the server which notebooks are open, puts Betty's status into the experiments' ones,
 * and applies the approved cell changes it hands over.
 */
export class NotebookLeases implements IDisposable {
  /**
   * `widgets` lists the main area's widgets now (the shell's); `contents` reads their files;
   * `apply` applies a cell change; while `hurry()` holds (the agent is working), the server
   * hears every second, so an approved change reaches the notebook at once.
   */
  constructor(
    private readonly api: BettyAPI,
    private readonly widgets: () => Iterable<Widget>,
    private readonly contents: Contents.IManager,
    private readonly apply: ChangeApplier | null = null,
    private readonly hurry: () => boolean = () => false
  ) {}

  /** One JupyterLab page: the name its leases go by. */
  readonly holder = randomHolder();

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Tell the server now, and every `RENEW_MS`. */
  start(): void {
    void this.tell();
    let waited = 0;
    this._timer = window.setInterval(() => {
      waited += HURRY_MS;
      if (waited >= RENEW_MS || this.hurry()) {
        waited = 0;
        void this.tell();
      }
    }, HURRY_MS);
  }

  /** Tell the server which notebooks are open now (after any word still on its way, so the last one counts). */
  tell(): Promise<void> {
    this._last = this._last
      .then(() => this._tell())
      .catch(error => console.error('Betty: the open notebooks could not be brought up to date', error));
    return this._last;
  }

  dispose(): void {
    this._disposed = true;
    window.clearInterval(this._timer);
  }

  private async _tell(): Promise<void> {
    if (this._disposed) {
      return;
    }
    const open = openNotebooks(this.widgets());
    let statuses: INotebookStatus[];
    let changes: ICellChangeJson[];
    try {
      const answer = await this.api.openNotebooks(this.holder, [...new Set(open.map(n => n.path))]);
      statuses = answer.notebooks;
      changes = answer.changes ?? [];
    } catch (error) {
      console.warn('Betty: could not tell the server which notebooks are open', error);
      return; // the server went away: its leases run out, and the next word renews them
    }
    const loaded = open.filter(n => n.notebook !== null);
    for (const tab of loaded.filter(n => !this._held.has(n.path))) {
      await tab.reloadIfChanged(this.contents); // held from now on: no Betty process writes it any more
    }
    this._held = new Set(loaded.map(n => n.path));
    for (const status of statuses) {
      for (const tab of loaded.filter(n => n.path === status.path)) {
        if (putStatus(tab.notebook!, status)) {
          tab.markChanged();
        }
      }
    }
    for (const change of changes) {
      const tab = loaded.find(n => n.path === change.path);
      const result = tab && this.apply ? await this.apply(tab.widget, change) : 'not applied: the tab closed';
      await this.api.changeResult(change.id, result).catch(error => console.warn('Betty: could not say how a notebook change went', error));
      if (tab && (result === 'inserted' || result === 'replaced' || result.startsWith('inserted beside'))) {
        tab.markChanged();
      }
    }
  }

  private _held = new Set<string>();
  private _disposed = false;
  private _timer = 0;
  private _last: Promise<void> = Promise.resolve();
}

function randomHolder(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, byte => byte.toString(16).padStart(2, '0')).join('');
}
