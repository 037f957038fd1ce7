/**
 * Betty's JupyterLab extension: the side panel, its commands (palette, file browser and
 * notebook context menus), its settings and the toasts of jobs that ended, of logins that
 * wait on the person and of other sessions' approval cards (an MCP client's, an automation's).
 */
import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { CodeEditor, IEditorServices } from '@jupyterlab/codeeditor';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { ISignal, Signal } from '@lumino/signaling';

import { BettyAPI } from './api';
import { IJobUpdateInfo } from './events';
import { BettyModel, ISavedSession, keptChats, panelSettings } from './model';
import { applyChange, IChangeableTab } from './notebookChanges';
import { NotebookContext } from './notebookContext';
import { NotebookLeases } from './notebooks';
import { kernelOf, NodeKernelStatus } from './nodeKernelStatus';
import { BettyPanel } from './panel';
import { askAboutCellPrompt, sizeGpusPrompt, submitScriptPrompt } from './prompts';
import { visibleText } from './safe';
import { activeCode } from './selection';
import { othersThan, whose } from './waiting';

const bettyIconSvg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20zm-1 5h2.5a3 3 0 0 1 1.9 5.3A3.2 3.2 0 0 1 13.8 18H11zm2 2v2.5h.5a1.25 1.25 0 0 0 0-2.5zm0 4.5V16h.8a1.25 1.25 0 0 0 0-2.5z"/>
  </g>
</svg>`;

/** Betty's icon, used for the side panel tab. */
export const bettyIcon = new LabIcon({ name: 'betty:icon', svgstr: bettyIconSvg });

/** The ids of Betty's commands. */
export namespace CommandIDs {
  /** Show the side panel. */
  export const open = 'betty:open';
  /** Send the active cell to Betty with a question about it. */
  export const askCell = 'betty:ask-about-cell';
  /** Ask Betty to estimate the GPU memory of the active cell or file. */
  export const sizeGpus = 'betty:size-gpus';
  /** Ask Betty to submit the `.sbatch` file selected in the file browser. */
  export const submitFile = 'betty:submit-file';
  /** Turn desktop notifications of job ends on or off (the `desktopNotices` setting). */
  export const desktopNotices = 'betty:desktop-notices';
}

/** The command that opens the side panel (kept for callers of the first version). */
export const OPEN_COMMAND = CommandIDs.open;

/** The file type of Slurm batch scripts, so the file browser can offer "Submit with Betty". */
export const SBATCH_FILE_TYPE = 'betty-sbatch';

/** The query parameter that opens the side panel: `/lab/tree/…?betty=open`. */
export const PANEL_PARAMETER = 'betty';

const PLUGIN_ID = 'betty-jupyter:plugin';
const SESSION_KEY = `${PLUGIN_ID}:session`;
/** Where the kept chats are saved (the state database), to be reopened after a reload. */
const CHATS_KEY = `${PLUGIN_ID}:chats`;

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Betty side panel: an assistant for researchers on Slurm clusters.',
  autoStart: true,
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    ISettingRegistry,
    IStateDB,
    IDefaultFileBrowser,
    IEditorServices,
    ILabShell,
    IStatusBar
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    state: IStateDB | null,
    fileBrowser: IDefaultFileBrowser | null,
    editorServices: IEditorServices | null,
    labShell: ILabShell | null,
    statusBar: IStatusBar | null
  ) => {
    const api = new BettyAPI();
    const model = new BettyModel({ api });
    model.notebookContext = new NotebookContext(api, () => app.shell.currentWidget);
    model.notebookContext.start();
    const open = (path: string) => void app.commands.execute('docmanager:open', { path });
    const editors = editorServices && {
      factory: editorServices.factoryService.newInlineEditor,
      Model: CodeEditor.Model,
      mimeType: editorServices.mimeTypeService.getMimeTypeByLanguage({ name: 'shell' }) || 'text/x-sh'
    };
    const panel = new BettyPanel({ model, open, editors });
    panel.title.icon = bettyIcon;
    panel.title.caption = 'Betty';
    app.shell.add(panel, 'right', { rank: 600 });
    restorer?.add(panel, panel.id);
    if (statusBar) {
      addNodeKernelStatus(app, api, model, statusBar, labShell);
    }

    // A job's end shows in the chat while the panel is open; a toast there would cover its prompt and Send.
    model.jobEnded.connect((_, job) => {
      if (!panel.isVisible) {
        toastJobEnded(job, open);
      }
    });
    // Betty writes no file of a notebook open here: its status goes into the open document.
    const leases = new NotebookLeases(
      api,
      () => app.shell.widgets('main'),
      app.serviceManager.contents,
      (widget, change) =>
        applyChange(widget as unknown as IChangeableTab, change, async () => {
          app.shell.activateById(widget.id);
          await app.commands.execute('notebook:run-cell');
        }),
      () => model.transcript.busy
    );
    labShell?.layoutModified.connect(() => void leases.tell());
    model.jobEnded.connect(() => void leases.tell());
    leases.start();
    const showPanel = () => app.shell.activateById(panel.id);
    toastWhileWaiting(
      model.logins,
      () => model.logins.questions.map(question => question.id),
      question => ({
        id: question.id,
        text: `${visibleText(question.cluster)} asks to log in: answer it in Betty's panel`
      }),
      () => panel.isVisible,
      showPanel
    );
    toastWhileWaiting(
      model.waiting,
      () =>
        othersThan(model.waiting.approvals, model.session?.session_id ?? null).map(
          a => a.approval_id
        ),
      approval => ({
        id: approval.approval_id,
        text: `${visibleText(whose(approval))} waits for your approval of ${approval.tool} in Betty's panel`
      }),
      () => panel.isVisible,
      showPanel
    );
    void startModel(model, settingRegistry, state);
    // A link that asks for the panel (the demo's first link) shows it once the layout is restored.
    if (new URLSearchParams(window.location.search).get(PANEL_PARAMETER) === 'open') {
      void app.restored.then(showPanel);
    }

    addCommands(app, panel, fileBrowser);
    if (settingRegistry) {
      app.commands.addCommand(CommandIDs.desktopNotices, {
        label: 'Betty: Desktop notifications of job ends',
        caption: 'Show a desktop notification when a watched job ends (the browser asks for permission)',
        isToggled: () => model.settings.desktopNotices,
        execute: () =>
          settingRegistry.set(PLUGIN_ID, 'desktopNotices', !model.settings.desktopNotices)
      });
      palette?.addItem({ command: CommandIDs.desktopNotices, category: 'Betty' });
    }
    for (const command of [CommandIDs.open, CommandIDs.askCell, CommandIDs.sizeGpus]) {
      palette?.addItem({ command, category: 'Betty' });
    }
    app.docRegistry.addFileType({
      name: SBATCH_FILE_TYPE,
      displayName: 'Slurm batch script',
      extensions: ['.sbatch'],
      mimeTypes: ['text/x-sh'],
      fileFormat: 'text',
      contentType: 'file'
    });
    app.contextMenu.addItem({
      command: CommandIDs.submitFile,
      selector: `.jp-DirListing-item[data-file-type="${SBATCH_FILE_TYPE}"]`,
      rank: 3
    });
    app.contextMenu.addItem({
      command: CommandIDs.askCell,
      selector: '.jp-Notebook .jp-Cell',
      rank: 20
    });
  }
};

/** Settings first (the default mode), then the session kept from the last visit. */
async function startModel(
  model: BettyModel,
  settingRegistry: ISettingRegistry | null,
  state: IStateDB | null
): Promise<void> {
  if (settingRegistry) {
    try {
      const settings = await settingRegistry.load(PLUGIN_ID);
      model.updateSettings(panelSettings(settings.composite));
      settings.changed.connect(() => model.updateSettings(panelSettings(settings.composite), true));
    } catch (error) {
      console.warn('Betty: settings could not be loaded, using the defaults', error);
    }
  }
  const saved = state ? ((await state.fetch(SESSION_KEY).catch(() => null)) as unknown) : null;
  const chats = state ? ((await state.fetch(CHATS_KEY).catch(() => null)) as unknown) : null;
  model.sessionChanged.connect((_, session) => {
    if (session && state) {
      const kept: ISavedSession = { session_id: session.session_id, cluster: session.cluster };
      void state.save(SESSION_KEY, kept as unknown as ReadonlyPartialJSONObject);
    }
  });
  model.chatsChanged.connect((_, kept) => {
    void state?.save(CHATS_KEY, { chats: kept } as unknown as ReadonlyPartialJSONObject);
  });
  const keptList = (chats as { chats?: unknown } | null)?.chats;
  await model.start(isSavedSession(saved) ? saved : null, keptChats(keptList));
}

function isSavedSession(value: unknown): value is ISavedSession {
  const saved = value as ISavedSession | null;
  return typeof saved?.session_id === 'string' && typeof saved?.cluster === 'string';
}

function addCommands(
  app: JupyterFrontEnd,
  panel: BettyPanel,
  fileBrowser: IDefaultFileBrowser | null
): void {
  const { commands, shell } = app;
  const ask = async (prompt: string) => {
    shell.activateById(panel.id);
    try {
      await panel.model.ask(prompt);
    } catch (error) {
      Notification.error(`Betty could not be asked: ${(error as Error).message}`, {
        autoClose: 8000
      });
    }
  };

  commands.addCommand(CommandIDs.open, {
    label: 'Betty: Open',
    caption: "Show Betty's side panel",
    icon: bettyIcon,
    execute: () => shell.activateById(panel.id)
  });

  commands.addCommand(CommandIDs.askCell, {
    label: 'Betty: Ask about the selected cell',
    caption: "Send the active cell's source to Betty",
    isEnabled: () => activeCode(shell.currentWidget)?.kind === 'cell',
    execute: () => {
      const code = activeCode(shell.currentWidget);
      if (code?.kind === 'cell' && code.text.trim()) {
        return ask(askAboutCellPrompt(code.text, code.path, code.language));
      }
    }
  });

  commands.addCommand(CommandIDs.sizeGpus, {
    label: 'Betty: Size GPUs for the selected script',
    caption: 'Ask Betty to estimate the GPU memory the active cell or file needs',
    isEnabled: () => activeCode(shell.currentWidget) !== null,
    execute: () => {
      const code = activeCode(shell.currentWidget);
      if (code && code.text.trim()) {
        return ask(sizeGpusPrompt(code.text, code.path, code.language));
      }
    }
  });

  commands.addCommand(CommandIDs.submitFile, {
    label: 'Submit with Betty',
    caption: 'Ask Betty to submit this batch script (you approve the exact script first)',
    icon: bettyIcon,
    isVisible: () => selectedFile(fileBrowser)?.endsWith('.sbatch') ?? false,
    execute: async () => {
      const path = selectedFile(fileBrowser);
      if (!path) {
        return;
      }
      const file = await app.serviceManager.contents.get(path, { content: true, format: 'text' });
      return ask(submitScriptPrompt(String(file.content ?? ''), path));
    }
  });
}

function selectedFile(fileBrowser: IDefaultFileBrowser | null): string | undefined {
  const first = fileBrowser?.selectedItems().next();
  return first && !first.done ? first.value.path : undefined;
}

/** A toast for a job that ended while Betty's panel was closed, with its notebook and page one click away. */
function toastJobEnded(job: IJobUpdateInfo, open: (path: string) => void): void {
  const actions: Notification.IAction[] = [];
  if (job.notebook) {
    actions.push({ label: 'Notebook', callback: () => open(job.notebook!) });
  }
  if (job.page) {
    actions.push({ label: 'Page', callback: () => open(job.page!) });
  }
  const state = job.state.split(/\s+/)[0];
  Notification.emit(
    `Job ${job.job_id} on ${job.cluster} ended: ${job.state}`,
    state === 'COMPLETED' ? 'success' : state === 'CANCELLED' ? 'warning' : 'error',
    { autoClose: 10000, actions }
  );
}

/** What asks the person something, one item at a time (login questions, waiting approvals). */
interface IAsking<T> {
  readonly asked: ISignal<unknown, T>;
  readonly changed: ISignal<unknown, void>;
}

/**
 * A toast for each item `source` asks while the panel is hidden, so nothing waits unseen; it
 * goes once the item is no longer among those `waiting` lists (answered, cancelled, timed out).
 */
function toastWhileWaiting<T>(
  source: IAsking<T>,
  waiting: () => string[],
  toastOf: (item: T) => { id: string; text: string },
  panelShown: () => boolean,
  showPanel: () => void
): void {
  const toasts = new Map<string, string>();
  source.asked.connect((_, item) => {
    const { id, text } = toastOf(item);
    if (!panelShown() && waiting().includes(id)) {
      const toast = Notification.warning(text, {
        autoClose: false,
        actions: [{ label: 'Open Betty', callback: showPanel }]
      });
      toasts.set(id, toast);
    }
  });
  source.changed.connect(() => {
    const still = new Set(waiting());
    for (const [id, toast] of toasts) {
      if (!still.has(id)) {
        Notification.dismiss(toast);
        toasts.delete(id);
      }
    }
  });
}

/** The status bar's time left of the node kernel (`%betty kernel`) of the notebook in front. */
function addNodeKernelStatus(
  app: JupyterFrontEnd,
  api: BettyAPI,
  model: BettyModel,
  statusBar: IStatusBar,
  labShell: ILabShell | null
): void {
  const item = new NodeKernelStatus({
    load: () => (model.cluster === null ? Promise.resolve(null) : api.nodeKernels(model.cluster)),
    current: () => kernelOf(app.shell.currentWidget)
  });
  const changed = new Signal<NodeKernelStatus, void>(item);
  item.changed = () => changed.emit();
  statusBar.registerStatusItem(`${PLUGIN_ID}:node-kernel`, {
    item,
    align: 'left',
    rank: 900,
    isActive: () => item.shown,
    activeStateChanged: changed
  });
  labShell?.currentChanged.connect(() => void item.read());
  item.start();
}

export default plugin;
