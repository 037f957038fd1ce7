/**
 * The notebooks open in this JupyterLab, as Betty needs to know them: the server hears which
 * are open (every few seconds and whenever one opens or closes), so no Betty process rewrites
 * their files meanwhile; Betty's status goes into the open document instead, and the person's
 * next save (or autosave) writes it together with their own edits, with no "File Changed"
 * dialog. With jupyter-collaboration the open document is the shared one, so every tab on it
 * shows the status at once.
 */
import type { ISharedCodeCell, ISharedNotebook } from '@jupyter/ydoc';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { IDisposable } from '@lumino/disposable';
import type { Widget } from '@lumino/widgets';

import { BettyAPI } from './api';
import { INotebookStatus } from './models';

/** How often the panel renews its word that a notebook is open (the server's lease lasts 30 s). */
export const RENEW_MS = 10_000;

/** The tag of Betty's status cell: its output is the only part of a notebook Betty writes. */
export const STATUS_TAG = 'betty-status';

/** A notebook open in a JupyterLab tab. */
export interface IOpenNotebook {
  /** Its path from Jupyter's root. */
  readonly path: string;
  /** Its document, once loaded (null while it loads). */
  readonly notebook: ISharedNotebook | null;
  /** Mark it as changed since its last save. */
  markChanged(): void;
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
    const shared = context.isReady ? (context.model.sharedModel as Partial<ISharedNotebook>) : null;
    open.push({
      path: context.path,
      notebook: shared && Array.isArray(shared.cells) ? (shared as ISharedNotebook) : null,
      markChanged: () => {
        context.model.dirty = true;
      }
    });
  }
  return open;
}

/**
 * Put Betty's status line into the status cells of `notebook`, unless a cell already shows the
 * job's state (the person ran it, or Betty wrote it); returns whether anything changed.
 */
export function putStatus(notebook: ISharedNotebook, status: INotebookStatus): boolean {
  const cells = notebook.cells.filter(isStatusCell).filter(cell => !showsState(cell, status));
  if (cells.length === 0) {
    return false;
  }
  notebook.transact(() => {
    for (const cell of cells) {
      cell.setOutputs([{ output_type: 'stream', name: 'stdout', text: `${status.status}\n` }]);
    }
  });
  return true;
}

function isStatusCell(cell: { cell_type: string; getMetadata(key: string): unknown }): cell is ISharedCodeCell {
  const tags = cell.getMetadata('tags');
  return cell.cell_type === 'code' && Array.isArray(tags) && tags.includes(STATUS_TAG);
}

/** Whether the cell's first line of output says the job is in `status.state` (Betty's line or the cell's own). */
export function showsState(cell: ISharedCodeCell, status: INotebookStatus): boolean {
  const first = cell.getOutputs().find(output => output.output_type === 'stream');
  const text = first ? String(Array.isArray(first.text) ? first.text.join('') : first.text ?? '') : '';
  const line = text.trim().split('\n')[0];
  const said = line.match(/^job (\S+) .*?: ([A-Z_]+)(?:\s|$)/);
  return said !== null && said[1] === status.job_id && said[2] === status.state;
}

/** Tells the server which notebooks are open, and puts Betty's status into the experiments' ones. */
export class NotebookLeases implements IDisposable {
  /** `widgets` lists the main area's widgets now (the shell's). */
  constructor(
    private readonly api: BettyAPI,
    private readonly widgets: () => Iterable<Widget>
  ) {}

  /** One JupyterLab page: the name its leases go by. */
  readonly holder = randomHolder();

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Tell the server now, and every `RENEW_MS`. */
  start(): void {
    this.tell();
    this._timer = window.setInterval(() => this.tell(), RENEW_MS);
  }

  /** Tell the server which notebooks are open now (after any word still on its way, so the last one counts). */
  tell(): Promise<void> {
    this._last = this._last.then(() => this._tell());
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
    try {
      statuses = (await this.api.openNotebooks(this.holder, [...new Set(open.map(n => n.path))])).notebooks;
    } catch (error) {
      console.warn('Betty: could not tell the server which notebooks are open', error);
      return; // the server went away: its leases run out, and the next word renews them
    }
    for (const status of statuses) {
      for (const tab of open.filter(n => n.path === status.path && n.notebook !== null)) {
        if (putStatus(tab.notebook!, status)) {
          tab.markChanged();
        }
      }
    }
  }

  private _disposed = false;
  private _timer = 0;
  private _last: Promise<void> = Promise.resolve();
}

function randomHolder(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, byte => byte.toString(16).padStart(2, '0')).join('');
}
