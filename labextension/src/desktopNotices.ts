/**
 * Desktop notices of job ends: one browser notification (the Notification API) per watched job
 * that ends, while JupyterLab is open, when the person turned them on (the `desktopNotices`
 * setting). The browser's permission is asked for only when the person turns them on, never at
 * load. Each notice is built only from Betty's own structured fields (the job's id, its end state,
 * how long it ran: {@link readOutLine}), never from text others can write (job names, logs).
 */
import { IJobUpdateInfo } from './events';
import { readOutLine } from './readout';

/** What the notices need of the browser's `Notification` (a stub in tests). */
export interface IDesktop {
  /** `granted`, `denied` or `default` (not asked yet). */
  permission(): string;
  /** Ask the person; resolves to the new permission. */
  request(): Promise<string>;
  /** Show one notification. */
  show(title: string, body: string, tag: string): void;
}

/** The browser's own notifications, or null where it has none. */
export function browserDesktop(): IDesktop | null {
  if (typeof window === 'undefined' || typeof window.Notification !== 'function') {
    return null;
  }
  return {
    permission: () => window.Notification.permission,
    request: () => window.Notification.requestPermission(),
    show: (title, body, tag) => void new window.Notification(title, { body, tag })
  };
}

/** Shows a notification per ended job while on; each job's end once. */
export class DesktopNotices {
  /** Whether the person turned them on. */
  enabled = false;

  private readonly _shown = new Set<string>();

  constructor(private readonly _desktop: IDesktop | null) {}

  /** Whether this browser can show notifications at all. */
  get available(): boolean {
    return this._desktop !== null;
  }

  /** Turn on or off; `ask`: the person just turned them on, so the browser's permission is asked for now. */
  setEnabled(on: boolean, ask: boolean): void {
    const turnedOn = on && !this.enabled;
    this.enabled = on;
    if (turnedOn && ask && this._desktop?.permission() === 'default') {
      void this._desktop.request().catch(() => undefined);
    }
  }

  /** Show that `job` ended after `seconds` (null when unknown), once per job and end state. */
  announce(job: IJobUpdateInfo, seconds: number | null): void {
    const desktop = this._desktop;
    if (!this.enabled || desktop === null || desktop.permission() !== 'granted') {
      return;
    }
    const key = JSON.stringify([job.cluster, job.job_id, job.state]);
    if (this._shown.has(key)) {
      return;
    }
    this._shown.add(key);
    const line = readOutLine(job, seconds);
    const body = line.charAt(0).toUpperCase() + line.slice(1);
    desktop.show('Betty: a job ended', body, `betty-${this._shown.size}`);
  }
}
