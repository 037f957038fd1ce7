/**
 * The context bulletin: where the person is working, shown as a chip above the prompt box and
 * sent with the next message unless they remove it. It names the active notebook and its
 * selected cell, the notebook's folder, its git branch (and whether it has uncommitted work),
 * and the kernel's recent errors as the notebook's outputs show them.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { BettyAPI } from './api';
import { IContextBulletin, IWorkingPlace } from './contract/serverApi';

/** How many of the notebook's latest errors the bulletin carries (the server takes at most 5). */
export const ERRORS_SENT = 3;
/** The longest error line sent (the server takes at most 1,000 characters). */
export const ERROR_CHARS = 300;

/** What the bulletin reads of a notebook tab (JupyterLab's `NotebookPanel`). */
export interface INotebookTab {
  context?: { path?: string; model?: { dirty?: boolean } };
  content?: {
    activeCellIndex?: number;
    activeCellChanged?: ISignal<unknown, unknown>;
    model?: {
      cells?: { length: number; get(index: number): { toJSON(): unknown } };
    } | null;
  };
}

interface IErrorOutput {
  output_type?: string;
  ename?: string;
  evalue?: string;
}

/** The bulletin of `widget` when it is a notebook tab (null otherwise), with the git facts of `place`. */
export function bulletinOf(widget: unknown, place: IWorkingPlace | null): IContextBulletin | null {
  const tab = widget as INotebookTab | null;
  const path = tab?.context?.path;
  if (typeof path !== 'string' || !path.endsWith('.ipynb')) {
    return null;
  }
  const bulletin: IContextBulletin = {
    notebook: path,
    directory: place?.directory ?? folderOf(path)
  };
  const cell = tab?.content?.activeCellIndex;
  if (typeof cell === 'number' && cell >= 0) {
    bulletin.cell = cell;
  }
  if (place?.branch) {
    bulletin.branch = place.branch;
    bulletin.dirty = place.dirty;
  }
  const errors = recentErrors(tab?.content?.model?.cells);
  if (errors.length > 0) {
    bulletin.errors = errors as IContextBulletin['errors'];
  }
  return bulletin;
}

/** The notebook's error outputs, the last `ERRORS_SENT`, each one line (`NameError: name 'x' is not defined`). */
export function recentErrors(
  cells: { length: number; get(index: number): { toJSON(): unknown } } | undefined
): string[] {
  const errors: string[] = [];
  for (let index = 0; cells && index < cells.length; index++) {
    const outputs = (cells.get(index).toJSON() as { outputs?: IErrorOutput[] }).outputs ?? [];
    for (const output of outputs) {
      if (output.output_type === 'error') {
        errors.push(
          `${output.ename ?? ''}: ${output.evalue ?? ''}`.replace(/\s+/g, ' ').slice(0, ERROR_CHARS)
        );
      }
    }
  }
  return errors.slice(-ERRORS_SENT);
}

/** The folder of `path` ('' at Jupyter's root). */
export function folderOf(path: string): string {
  return path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
}

/** The bulletin now, kept up to date as the person moves between notebooks and cells. */
export class NotebookContext {
  /** `current` is the main area's current widget (the shell's). */
  constructor(
    private readonly api: BettyAPI,
    private readonly current: () => unknown
  ) {}

  /** The bulletin to show and send (null: no notebook is active). */
  get bulletin(): IContextBulletin | null {
    return this._bulletin;
  }

  /** Emitted when the bulletin changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Read the current widget again (on the shell's change, and every `everyMs` for the selected cell and errors). */
  start(everyMs = 1500): void {
    this.update();
    this._timer = window.setInterval(() => this.update(), everyMs);
  }

  /** Whether the active notebook has changes not yet saved (false when no notebook is active). */
  unsaved(): boolean {
    return (this.current() as INotebookTab | null)?.context?.model?.dirty === true;
  }

  dispose(): void {
    window.clearInterval(this._timer);
    this._follow(null);
  }

  /** Read the current widget now; the git facts are asked for once per notebook opened. */
  update(): void {
    const widget = this.current();
    this._follow(widget as INotebookTab | null);
    const path = (widget as INotebookTab | null)?.context?.path ?? null;
    if (path !== null && path.endsWith('.ipynb') && path !== this._placeFor) {
      this._placeFor = path;
      this._place = null;
      this.api
        .workingPlace(path)
        .then(place => {
          if (this._placeFor === path) {
            this._place = place;
            this.update();
          }
        })
        .catch(error => console.warn('Betty: no git facts for the context chip', error));
    }
    const next = bulletinOf(widget, path === this._placeFor ? this._place : null);
    if (JSON.stringify(next) !== JSON.stringify(this._bulletin)) {
      this._bulletin = next;
      this._changed.emit();
    }
  }

  /** Hear the selected cell change in `tab` at once (and no longer in the tab before it). */
  private _follow(tab: INotebookTab | null): void {
    const signal = tab?.content?.activeCellChanged ?? null;
    if (signal !== this._following) {
      this._following?.disconnect(this._onCell, this);
      signal?.connect(this._onCell, this);
      this._following = signal;
    }
  }

  private _onCell(): void {
    this.update();
  }

  private _following: ISignal<unknown, unknown> | null = null;
  private _bulletin: IContextBulletin | null = null;
  private _place: IWorkingPlace | null = null;
  private _placeFor: string | null = null;
  private _timer = 0;
  private _changed = new Signal<this, void>(this);
}
