/**
 * The Betty side panel widget: a ReactWidget rendering {@link BettyApp} from its model,
 * re-rendered (batched by Lumino's update requests) whenever the model changes.
 */
import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { BettyApp } from './components/BettyApp';
import { EditingContext, IEditing, IScriptEditors } from './editing';
import { BettyModel } from './model';
import { outcomeRows } from './table';

/** What the panel needs from JupyterLab. */
export interface IBettyPanelOptions {
  model: BettyModel;
  /** Opens a workspace file (`docmanager:open`). */
  open: (path: string) => void;
  /** JupyterLab's code editor for scripts on approval cards (null: a plain text area). */
  editors?: IScriptEditors | null;
}

/** The side panel. */
export class BettyPanel extends ReactWidget {
  /** The panel's state. */
  readonly model: BettyModel;
  private readonly _open: (path: string) => void;
  private readonly _editing: IEditing;

  constructor(options: IBettyPanelOptions) {
    super();
    this.id = 'betty-panel';
    this.addClass('betty-Panel');
    this.node.dataset.testid = 'betty-panel';
    this.model = options.model;
    this._open = options.open;
    this._editing = editingOf(this.model, options.editors ?? null);
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
    return (
      <EditingContext.Provider value={this._editing}>
        <BettyApp model={this.model} onOpen={this._open} />
      </EditingContext.Provider>
    );
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

/** The edit services of the approval cards in a panel showing `model`. */
export function editingOf(model: BettyModel, editors: IScriptEditors | null): IEditing {
  return {
    repreview: async (approvalId, args) => (await model.api.repreview(approvalId, args)).preview,
    partitions: async cluster => {
      const rows = outcomeRows(await model.api.partitions(cluster));
      return [...new Set(rows.map(row => String(row.partition)))];
    },
    editors,
    opensEditing: request => model.opensEditing(request.call_id)
  };
}
