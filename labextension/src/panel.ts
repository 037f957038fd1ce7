/**
 * The Betty side panel. For now it shows whether Betty's server extension answers,
 * its version and the clusters it is configured for.
 */
import { Widget } from '@lumino/widgets';

import { IHealth } from './models';
import { requestAPI } from './request';

/** The side panel widget. */
export class BettyPanel extends Widget {
  private readonly _status: HTMLElement;

  constructor() {
    super();
    this.id = 'betty-panel';
    this.addClass('betty-Panel');
    const title = document.createElement('h2');
    title.className = 'betty-Panel-title';
    title.textContent = 'Betty';
    this._status = document.createElement('div');
    this._status.className = 'betty-Panel-health';
    this._status.textContent = 'Connecting to Betty…';
    this.node.append(title, this._status);
  }

  /** Ask the server extension for its health and show the answer. */
  async refresh(): Promise<void> {
    try {
      const health = await requestAPI<IHealth>('health');
      this.showHealth(health);
    } catch (error) {
      this._status.dataset.state = 'error';
      this._status.textContent = `Betty's server extension did not answer: ${
        (error as Error).message
      }`;
    }
  }

  /** Render a health answer. */
  showHealth(health: IHealth): void {
    this._status.dataset.state = 'ok';
    this._status.replaceChildren();
    const version = document.createElement('p');
    version.className = 'betty-Panel-version';
    version.textContent = `Betty ${health.version} is running.`;
    const clusters = document.createElement('p');
    clusters.className = 'betty-Panel-clusters';
    clusters.textContent =
      health.clusters.length > 0
        ? `Clusters: ${health.clusters.join(', ')}`
        : 'No cluster is configured yet.';
    this._status.append(version, clusters);
  }
}
