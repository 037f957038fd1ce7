/**
 * The Betty side panel widget: a ReactWidget rendering {@link BettyApp} from its model,
 * re-rendered (batched by Lumino's update requests) whenever the model changes.
 */
import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { SplitPanel, Widget } from '@lumino/widgets';
import * as React from 'react';

import { BettyApp } from './components/BettyApp';
import { EditingContext, IEditing, IScriptEditors } from './editing';
import { BettyModel } from './model';
import { outcomeRows } from './table';

/** The widest the panel opens at, in pixels (in a window of 1200 pixels or more). */
export const PANEL_WIDTH = 360;
/** The narrowest it opens at: its four tabs in a row. */
const PANEL_LEAST_WIDTH = 300;
/** The narrowest the main area (the notebooks) is left when the panel widens itself. */
const MAIN_AREA_FLOOR = 360;

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
  private _widened = false;

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
    if (!this._widened) {
      // Once a page: the sidebar JupyterLab opens is narrower than the panel's tabs and cards.
      // A width the person drags to afterwards stays.
      this._widened = true;
      requestAnimationFrame(() => widenSidebar(this, openingWidth(window.innerWidth)));
    }
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
    opensEditing: request => model.opensEditing(request.call_id),
    startEstimate: async approvalId => (await model.api.startEstimate(approvalId)).estimate
  };
}

/** The width the panel opens at in a window `windowWidth` pixels wide: 30 % of it, within bounds. */
export function openingWidth(windowWidth: number): number {
  return Math.round(Math.min(PANEL_WIDTH, Math.max(PANEL_LEAST_WIDTH, 0.3 * windowWidth)));
}

/**
 * Widen the sidebar holding `panel` to `width` pixels, taking the room from the widest other area
 * of JupyterLab's split (the notebooks) as long as it keeps {@link MAIN_AREA_FLOOR}; nothing when
 * the sidebar is already as wide, or the panel is not in a split.
 */
export function widenSidebar(panel: Widget, width: number): void {
  let area: Widget = panel;
  let split = panel.parent;
  while (split !== null && !(split instanceof SplitPanel)) {
    area = split;
    split = split.parent;
  }
  if (split === null) {
    return;
  }
  const widths = split.widgets.map(each => (each.isVisible ? each.node.offsetWidth : 0));
  const index = split.widgets.indexOf(area);
  const main = widths.indexOf(Math.max(...widths.filter((_, i) => i !== index)));
  const extra = Math.min(width - widths[index], widths[main] - MAIN_AREA_FLOOR);
  const sizes = split.relativeSizes();
  const shown = widths.reduce((sum, each) => sum + each, 0);
  const units = sizes.reduce((sum, each, i) => sum + (widths[i] > 0 ? each : 0), 0);
  if (extra <= 0 || main === index || shown === 0 || units === 0) {
    return;
  }
  // Hidden areas keep their share, for when they open again.
  const perPixel = units / shown;
  sizes[index] += extra * perPixel;
  sizes[main] -= extra * perPixel;
  split.setRelativeSizes(sizes);
}
