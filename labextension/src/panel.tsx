/**
 * The Betty side panel widget: a ReactWidget rendering {@link BettyApp} from its model,
 * re-rendered (batched by Lumino's update requests) whenever the model changes.
 */
import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { BettyApp } from './components/BettyApp';
import { BettyModel } from './model';

/** What the panel needs from JupyterLab. */
export interface IBettyPanelOptions {
  model: BettyModel;
  /** Opens a workspace file (`docmanager:open`). */
  open: (path: string) => void;
}

/** The side panel. */
export class BettyPanel extends ReactWidget {
  /** The panel's state. */
  readonly model: BettyModel;
  private readonly _open: (path: string) => void;

  constructor(options: IBettyPanelOptions) {
    super();
    this.id = 'betty-panel';
    this.addClass('betty-Panel');
    this.node.dataset.testid = 'betty-panel';
    this.model = options.model;
    this._open = options.open;
    this.model.changed.connect(() => this.update(), this);
  }

  /** Free the model and its socket with the panel. */
  dispose(): void {
    if (!this.isDisposed) {
      this.model.dispose();
    }
    super.dispose();
  }

  protected render(): JSX.Element {
    return <BettyApp model={this.model} onOpen={this._open} />;
  }

  /**
   * Login questions and waiting approvals are read while the panel is attached, shown or not: a
   * login, or another agent's call, waits on them.
   */
  protected onAfterAttach(message: Message): void {
    super.onAfterAttach(message);
    this.model.logins.start();
    this.model.waiting.start();
  }

  protected onBeforeDetach(message: Message): void {
    this.model.logins.stop();
    this.model.waiting.stop();
    super.onBeforeDetach(message);
  }

  protected onAfterShow(message: Message): void {
    super.onAfterShow(message);
    this.model.setVisible(true);
  }

  protected onAfterHide(message: Message): void {
    super.onAfterHide(message);
    this.model.setVisible(false);
  }
}
