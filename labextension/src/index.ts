/**
 * Betty's JupyterLab extension: registers the side panel and its command.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { LabIcon } from '@jupyterlab/ui-components';

import { BettyPanel } from './panel';

const bettyIconSvg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20zm-1 5h2.5a3 3 0 0 1 1.9 5.3A3.2 3.2 0 0 1 13.8 18H11zm2 2v2.5h.5a1.25 1.25 0 0 0 0-2.5zm0 4.5V16h.8a1.25 1.25 0 0 0 0-2.5z"/>
  </g>
</svg>`;

/** Betty's icon, used for the side panel tab. */
export const bettyIcon = new LabIcon({ name: 'betty:icon', svgstr: bettyIconSvg });

/** The command that opens the side panel. */
export const OPEN_COMMAND = 'betty:open';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'betty-jupyter:plugin',
  description: 'Betty side panel: an assistant for researchers on Slurm clusters.',
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    const panel = new BettyPanel();
    panel.title.icon = bettyIcon;
    panel.title.caption = 'Betty';
    app.shell.add(panel, 'right', { rank: 600 });
    restorer?.add(panel, panel.id);
    void panel.refresh();

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Open Betty',
      execute: () => {
        app.shell.activateById(panel.id);
        return panel.refresh();
      }
    });
  }
};

export default plugin;
