/**
 * The status bar's node kernel: while the notebook in front has started a `%betty kernel`
 * allocation that has not ended, `node kernel: 118 min left` (its end in the tooltip), counted
 * down between reads of `GET node-kernels`: when another tab comes in front, and every half minute
 * while the page is visible.
 */
import { Widget } from '@lumino/widgets';

import { INodeKernel, INodeKernels } from './models';
import { visibleText } from './safe';

/** How often the allocations are read again, in milliseconds. */
export const READ_MS = 30_000;
/** How often the time left is counted down, in milliseconds. */
const TICK_MS = 15_000;

/** What a notebook tab offers of its Jupyter kernel (JupyterLab's `NotebookPanel`). */
interface IKernelTab {
  sessionContext?: { session?: { kernel?: { id?: string } | null } | null };
}

/** The Jupyter kernel id of `widget` when it is a notebook (or console) tab with a kernel; null otherwise. */
export function kernelOf(widget: unknown): string | null {
  const id = (widget as IKernelTab | null)?.sessionContext?.session?.kernel?.id;
  return typeof id === 'string' ? id : null;
}

/** The item's text and tooltip for the notebook kernel `kernelId` ("" when it started no running node kernel). */
export function statusOf(
  kernels: INodeKernel[],
  kernelId: string | null,
  secondsAgo: number
): { text: string; title: string } {
  const mine = kernelId === null ? undefined : kernels.find(kernel => kernel.notebook_kernel === kernelId);
  if (!mine) {
    return { text: '', title: '' };
  }
  const job = visibleText(mine.job_id);
  if (mine.seconds_left === null || mine.seconds_left === undefined || !mine.ends) {
    return { text: `node kernel: ${visibleText(mine.state)}`, title: `node kernel job ${job}` };
  }
  const left = Math.ceil(Math.max(0, mine.seconds_left - secondsAgo) / 60);
  return {
    text: `node kernel: ${left} min left`,
    title: `node kernel job ${job} ends at ${mine.ends.slice(11, 16)}`
  };
}

/** Props of {@link NodeKernelStatus}. */
export interface INodeKernelStatusOptions {
  load: () => Promise<INodeKernels | null>;
  /** The Jupyter kernel id of the tab in front. */
  current: () => string | null;
  now?: () => number;
}

/** The status bar item (a plain Lumino widget: one line of text). */
export class NodeKernelStatus extends Widget {
  constructor(private readonly options: INodeKernelStatusOptions) {
    super();
    this.addClass('betty-NodeKernelStatus');
    this.node.dataset.testid = 'betty-node-kernel-status';
  }

  /** Whether it has something to say (the status bar shows it only then). */
  get shown(): boolean {
    return this.node.textContent !== '';
  }

  /** Read the allocations now and every {@link READ_MS} while the page is visible; count down in between. */
  start(): void {
    void this.read();
    this.timers.push(
      window.setInterval(() => {
        if (document.visibilityState !== 'hidden') {
          void this.read();
        }
      }, READ_MS),
      window.setInterval(() => this.showLeft(), TICK_MS)
    );
  }

  /** Show the time left of the tab in front's node kernel again (not Lumino's `show`, which the status bar calls). */
  showLeft(): void {
    const now = (this.options.now ?? Date.now)();
    const { text, title } = statusOf(this.kernels, this.options.current(), (now - this.at) / 1000);
    this.node.textContent = text;
    this.node.title = title;
    this.changed?.();
  }

  /** Called when what it shows changed (the status bar then shows or hides it). */
  changed: (() => void) | null = null;

  async read(): Promise<void> {
    try {
      const answer = await this.options.load();
      this.kernels = answer?.kernels ?? [];
    } catch {
      this.kernels = [];
    }
    this.at = (this.options.now ?? Date.now)();
    this.showLeft();
  }

  dispose(): void {
    this.timers.forEach(timer => window.clearInterval(timer));
    this.timers = [];
    super.dispose();
  }

  private kernels: INodeKernel[] = [];
  private at = 0;
  private timers: number[] = [];
}
