/**
 * The side panel's state and what it does: the clusters, the chat session and its
 * socket, the transcript the events build, and the person's actions. The React views
 * render it and call its methods; they hold no state of their own that matters.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { BettyAPI, IPlacement } from './api';
import { isServerError } from './contract/checks';
import { IContextBulletin } from './contract/serverApi';
import { browserDesktop, DesktopNotices, IDesktop } from './desktopNotices';
import { IJobUpdateInfo, jobEnded, parseEvent, PersonDecision } from './events';
import {
  addNote,
  emptyTranscript,
  ITranscript,
  markDisconnected,
  reduce,
  restartStream,
  reviveApprovals
} from './transcript';
import { LoginQuestions } from './logins';
import { NotebookContext } from './notebookContext';
import { BettyRequestError } from './request';
import { WaitingApprovals } from './waiting';
import { ICluster, ISession, Mode, MODES, SocketMessage } from './models';
import { browserReadOut, IReadOutOptions, ReadOut } from './readout';
import { ChatSocket, chatSocketUrl, IChatSocketOptions, SocketStatus } from './socket';

/** The panel's tabs. */
export type Tab = 'chat' | 'jobs' | 'cluster' | 'experiments' | 'automations' | 'gpu' | 'timeline';

/** The settings of the front-end (`schema/plugin.json`). */
export interface IPanelSettings {
  /** Seconds between refreshes of the Jobs tab while it is visible. */
  jobsRefreshSeconds: number;
  /** The mode new chat sessions start in. */
  defaultMode: Mode;
  /** Whether job ends are read out loud (`readout.ts`). */
  readOut: boolean;
  /** Whether job ends show as desktop notifications (`desktopNotices.ts`). */
  desktopNotices: boolean;
}

/** The defaults of {@link IPanelSettings}, as in `schema/plugin.json`. */
export const DEFAULT_SETTINGS: IPanelSettings = {
  jobsRefreshSeconds: 15,
  defaultMode: 'confirm',
  readOut: false,
  desktopNotices: false
};

/** The panel's settings from the settings registry's composite (odd values are left out). */
export function panelSettings(composite: Record<string, unknown>): Partial<IPanelSettings> {
  const settings: Partial<IPanelSettings> = {};
  const seconds = composite.jobsRefreshSeconds;
  if (typeof seconds === 'number' && seconds >= 5) {
    settings.jobsRefreshSeconds = seconds;
  }
  const mode = composite.defaultMode;
  if (typeof mode === 'string' && (MODES as readonly string[]).includes(mode)) {
    settings.defaultMode = mode as Mode;
  }
  if (typeof composite.readOut === 'boolean') {
    settings.readOut = composite.readOut;
  }
  if (typeof composite.desktopNotices === 'boolean') {
    settings.desktopNotices = composite.desktopNotices;
  }
  return settings;
}

/** The session a panel keeps across page reloads. */
export interface ISavedSession {
  session_id: string;
  cluster: string;
}

/** A chat the panel keeps so it can be reopened: its session, cluster, first question and start. */
export interface IChatEntry {
  session_id: string;
  cluster: string;
  /** The person's first question ('' before one was asked). */
  title: string;
  /** When it started (milliseconds since the epoch). */
  started: number;
}

/** How many chats the panel keeps (the oldest are forgotten first). */
export const KEPT_CHATS = 50;

/** The kept chats in `value` (a saved list), odd entries left out. */
export function keptChats(value: unknown): IChatEntry[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter(
      (entry: Partial<IChatEntry> | null): entry is IChatEntry =>
        typeof entry?.session_id === 'string' &&
        typeof entry.cluster === 'string' &&
        typeof entry.title === 'string' &&
        typeof entry.started === 'number'
    )
    .slice(0, KEPT_CHATS);
}

/** What the model is built from; `socket` is replaceable for tests. */
export interface IBettyModelOptions {
  api: BettyAPI;
  settings?: Partial<IPanelSettings>;
  socket?: (options: IChatSocketOptions) => ChatSocket;
  /** How job ends are spoken (the browser's speech synthesis unless given). */
  readOut?: IReadOutOptions;
  /** How job ends reach the desktop (the browser's notifications unless given; null: none). */
  desktop?: IDesktop | null;
}

/** The side panel's state; {@link BettyModel.changed} fires on every change. */
export class BettyModel {
  /** The configured clusters. */
  clusters: ICluster[] = [];
  /** The cluster of the chat session. */
  cluster: string | null = null;
  /** The chat session. */
  session: ISession | null = null;
  /** The chat transcript the session's events built. */
  transcript: ITranscript = emptyTranscript();
  /** The chats kept to be reopened, newest first, of every cluster. */
  chats: IChatEntry[] = [];
  /** The chat socket's state. */
  status: SocketStatus = 'closed';
  /** A problem the whole panel shows (no server extension, no cluster). */
  error: string | null = null;
  /** The tab on screen. */
  tab: Tab = 'chat';
  /** Where the person works, for the chat's context chip (set by the extension; null without one). */
  notebookContext: NotebookContext | null = null;
  /** Whether the panel itself is on screen. */
  visible = false;
  settings: IPanelSettings;
  /** What the clusters' login nodes ask the person (read while the panel is attached). */
  readonly logins: LoginQuestions;
  /** The approvals waiting for the person in every session (read while the panel is attached). */
  readonly waiting: WaitingApprovals;
  /** The spoken read-out of job ends (on with the `readOut` setting). */
  readonly readOut: ReadOut;
  /** Desktop notifications of job ends (on with the `desktopNotices` setting). */
  readonly desktop: DesktopNotices;

  private readonly _api: BettyAPI;
  private readonly _makeSocket: (options: IChatSocketOptions) => ChatSocket;
  private _socket: ChatSocket | null = null;
  private readonly _answers = new Map<string, IAnswerWaiting>();
  private readonly _editOnArrival = new Set<string>();
  private _generation = 0;
  private _toastAfter = 0;
  /** When each job was first seen running (the event's `ts`), for how long it ran. */
  private readonly _runningSince = new Map<string, number>();
  private readonly _changed = new Signal<this, void>(this);
  private readonly _jobEnded = new Signal<this, IJobUpdateInfo>(this);
  private readonly _sessionChanged = new Signal<this, ISession | null>(this);
  private readonly _chatsChanged = new Signal<this, IChatEntry[]>(this);

  constructor(options: IBettyModelOptions) {
    this._api = options.api;
    this.settings = { ...DEFAULT_SETTINGS, ...options.settings };
    this._makeSocket = options.socket ?? (socketOptions => new ChatSocket(socketOptions));
    this.logins = new LoginQuestions(options.api);
    this.waiting = new WaitingApprovals(options.api);
    this.readOut = new ReadOut(options.readOut ?? browserReadOut());
    this.readOut.enabled = this.settings.readOut;
    this.desktop = new DesktopNotices(options.desktop === undefined ? browserDesktop() : options.desktop);
    this.desktop.setEnabled(this.settings.desktopNotices, false);
  }

  /** Fires on every change of the state. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Fires when a job this session watches has ended (not for events replayed from before). */
  get jobEnded(): ISignal<this, IJobUpdateInfo> {
    return this._jobEnded;
  }

  /** Fires when the chat session changes (to keep it across reloads). */
  get sessionChanged(): ISignal<this, ISession | null> {
    return this._sessionChanged;
  }

  /** Fires when the kept chats change (to keep them across reloads). */
  get chatsChanged(): ISignal<this, IChatEntry[]> {
    return this._chatsChanged;
  }

  /** The REST API the model calls (the views load jobs and experiments through it). */
  get api(): BettyAPI {
    return this._api;
  }

  /**
   * Load the clusters and open the chat: `saved` is resumed when it can be; `chats` are the
   * chats kept from an earlier visit, to be reopened.
   */
  async start(saved: ISavedSession | null = null, chats: IChatEntry[] = []): Promise<void> {
    if (chats.length > 0 && this.chats.length === 0) {
      this.chats = keptChats(chats);
    }
    try {
      this.clusters = (await this._api.clusters()).clusters;
    } catch (error) {
      this._fail(`Betty's server extension did not answer: ${(error as Error).message}`);
      return;
    }
    const known = (name: string | undefined) => this.clusters.some(c => c.name === name);
    const cluster = known(saved?.cluster)
      ? saved!.cluster
      : (this.clusters.find(c => c.default) ?? this.clusters[0])?.name;
    if (cluster === undefined) {
      this._fail(
        'No cluster is configured yet: add one with `betty cluster add NAME --host ALIAS`.'
      );
      return;
    }
    await this._open(cluster, saved?.cluster === cluster ? saved.session_id : undefined);
  }

  /** Work on `cluster`: its latest chat is reopened, or a new one starts there. */
  switchCluster(cluster: string): Promise<void> {
    const latest = this.chats.find(chat => chat.cluster === cluster);
    return this._open(cluster, latest?.session_id);
  }

  /** Reopen the kept chat `sessionId` (on its own cluster), its transcript replayed. */
  async openChat(sessionId: string): Promise<void> {
    const chat = this.chats.find(each => each.session_id === sessionId);
    if (chat !== undefined && chat.session_id !== this.session?.session_id) {
      await this._open(chat.cluster, chat.session_id);
    }
  }

  /** Start a new chat on the same cluster. */
  async newChat(): Promise<void> {
    if (this.cluster !== null) {
      await this._open(this.cluster);
    } else {
      await this.start();
    }
  }

  /** Switch the session's mode. */
  async setMode(mode: Mode): Promise<void> {
    if (this.session === null) {
      return;
    }
    try {
      this.session = await this._api.setMode(this.session.session_id, mode);
      this.error = null;
    } catch (error) {
      this.error = `The mode stays ${this.session.mode}: ${(error as Error).message}`;
    }
    this._changed.emit();
  }

  /**
   * Ask the agent, with the context bulletin the person saw on the chip (null: none is sent);
   * rejects with a one-line message when it could not be sent.
   */
  async ask(prompt: string, context: IContextBulletin | null = null): Promise<void> {
    const session = this.session;
    if (session === null) {
      throw new Error(this.error ?? 'Betty has no chat session yet.');
    }
    this.setTab('chat');
    this._titled(session.session_id, prompt);
    const message = context === null ? { type: 'ask' as const, prompt } : { type: 'ask' as const, prompt, context };
    if (!this._socket?.send(message)) {
      await this._api.ask(session.session_id, prompt, context);
    }
  }

  /** Stop the agent's turn. */
  stop(): void {
    const session = this.session;
    if (session !== null && !this._socket?.send({ type: 'stop' })) {
      this._api.stop(session.session_id).catch(error => this._note((error as Error).message));
    }
  }

  /**
   * Answer an approval: on the chat socket when it is open (the action log names the
   * approver "<user> (side panel)"), over REST otherwise. Resolves once the server
   * confirms the decision; rejects with the server's one-line message.
   */
  async decide(
    approvalId: string,
    decision: PersonDecision,
    args?: Record<string, unknown>,
    digest?: string
  ): Promise<void> {
    const message: SocketMessage = {
      type: 'approval',
      approval_id: approvalId,
      decision,
      ...(decision === 'edited' ? { args } : {}),
      ...(digest ? { digest } : {})
    };
    if (this._socket?.send(message)) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => this._settle(approvalId, 'Betty did not confirm this answer; try again.'),
          ANSWER_TIMEOUT_MS
        );
        this._answers.get(approvalId)?.reject(new Error('answered again'));
        this._answers.set(approvalId, { resolve, reject, timer });
      });
    }
    await this._api.decide(approvalId, decision, args, digest);
  }

  /** Ask to cancel a job in this chat: its approval card arrives in the transcript. */
  async cancelJob(jobId: string): Promise<void> {
    const session = this.session;
    if (session === null) {
      throw new Error(this.error ?? 'Betty has no chat session yet.');
    }
    const answer = await this._api.cancelJob(jobId, session.session_id, session.cluster);
    if (answer.session_id !== session.session_id) {
      this._note(`The cancel of job ${jobId} waits for approval in session ${answer.session_id}.`);
    }
    this.setTab('chat');
  }

  /** Ask to give a running job Betty recorded more time: its `cluster_extend` card arrives in this chat. */
  async extendJob(jobId: string): Promise<void> {
    const session = this.session;
    if (session === null) {
      throw new Error(this.error ?? 'Betty has no chat session yet.');
    }
    await this._api.extendJob(jobId, session.session_id, session.cluster);
    this.setTab('chat');
  }

  /**
   * Resubmit a job Betty recorded: its `cluster_submit` card arrives in this chat and opens in
   * the editor with the job's script; nothing is submitted until the person approves it.
   */
  async resubmitJob(jobId: string, placement?: IPlacement): Promise<void> {
    const session = this.session;
    if (session === null) {
      throw new Error(this.error ?? 'Betty has no chat session yet.');
    }
    const answer = await this._api.resubmitJob(jobId, session.session_id, session.cluster, placement);
    if (!placement) {
      this._editOnArrival.add(answer.call_id); // a move is decided on its diff; a plain Resubmit… is edited
    }
    this.setTab('chat');
  }

  /** Whether the card of call `callId` opens in the editor at once (a Resubmit… the person asked for). */
  opensEditing(callId: string): boolean {
    return this._editOnArrival.has(callId);
  }

  /**
   * Start `tool` (a sweep's `sweep_retry` or `sweep_cancel`) with `args` in this chat: its card
   * arrives there and nothing runs until the person approves it.
   */
  async startInChat(tool: string, args: Record<string, unknown>): Promise<void> {
    const session = this.session;
    if (session === null) {
      throw new Error(this.error ?? 'Betty has no chat session yet.');
    }
    await this._api.startCall(session.session_id, tool, args);
    this.setTab('chat');
  }

  /** Show `tab`. */
  setTab(tab: Tab): void {
    if (tab !== this.tab) {
      this.tab = tab;
      this._changed.emit();
    }
  }

  /** The panel came on or went off screen. */
  setVisible(visible: boolean): void {
    if (visible !== this.visible) {
      this.visible = visible;
      this._changed.emit();
    }
  }

  /** New settings from the settings registry; `byPerson`: changed while the page runs (not read at load). */
  updateSettings(settings: Partial<IPanelSettings>, byPerson = false): void {
    this.settings = { ...this.settings, ...settings };
    this.desktop.setEnabled(this.settings.desktopNotices, byPerson);
    this.readOut.enabled = this.settings.readOut;
    if (!this.readOut.enabled) {
      this.readOut.stop();
    }
    this._changed.emit();
  }

  /** Close the socket and stop reading login questions and waiting approvals, for good. */
  dispose(): void {
    this.logins.dispose();
    this.waiting.dispose();
    this._generation += 1;
    this._socket?.dispose();
    this._socket = null;
    this._settleAll('The panel was closed.');
    Signal.clearData(this);
  }

  /**
   * Open (or resume) a chat on `cluster`. `siteRefused` is the server's line when the site's policy refused the
   * mode this panel starts chats in: the chat then starts in the server's own mode, and the panel says why.
   */
  private async _open(cluster: string, resume?: string, siteRefused?: string): Promise<void> {
    const generation = ++this._generation;
    this._socket?.dispose();
    this._socket = null;
    this._settleAll('The chat was closed before Betty confirmed the answer.');
    this.cluster = cluster;
    this.status = 'connecting';
    this._changed.emit();
    let session: ISession;
    try {
      session = await this._api.openSession(
        resume
          ? { cluster, session_id: resume }
          : siteRefused
            ? { cluster }
            : { cluster, mode: this.settings.defaultMode }
      );
    } catch (error) {
      if (generation !== this._generation) {
        return;
      }
      if (resume) {
        return this._open(cluster); // the kept session is gone: a new one
      }
      if (!siteRefused && error instanceof BettyRequestError && error.status === 403) {
        return this._open(cluster, undefined, error.message); // the site does not allow the panel's mode
      }
      this._fail(`Betty could not start a chat on ${cluster}: ${(error as Error).message}`);
      return;
    }
    if (generation !== this._generation) {
      return;
    }
    this.session = session;
    this.error = siteRefused ? `${siteRefused}. This chat starts in ${session.mode} mode.` : null;
    this.transcript = emptyTranscript(session.session_id);
    this._toastAfter = session.last_seq;
    this._kept(session);
    this._connect(session.session_id);
    this._sessionChanged.emit(session);
    this._changed.emit();
  }

  /** `session` is among the kept chats (a new one first). */
  private _kept(session: ISession): void {
    if (this.chats.some(chat => chat.session_id === session.session_id)) {
      return;
    }
    const entry = { session_id: session.session_id, cluster: session.cluster, title: '', started: Date.now() };
    this.chats = [entry, ...this.chats].slice(0, KEPT_CHATS);
    this._chatsChanged.emit(this.chats);
  }

  /** The kept chat `sessionId` is named by its first question. */
  private _titled(sessionId: string, prompt: string): void {
    const title = prompt.trim().split('\n')[0].slice(0, 120);
    const chat = this.chats.find(each => each.session_id === sessionId);
    if (chat === undefined || chat.title !== '' || title === '') {
      return;
    }
    this.chats = this.chats.map(each => (each === chat ? { ...chat, title } : each));
    this._chatsChanged.emit(this.chats);
  }

  private _connect(sessionId: string): void {
    const settings = this._api.settings;
    this._socket = this._makeSocket({
      url: after => chatSocketUrl(settings, sessionId, after),
      lastSeq: () => this.transcript.lastSeq,
      onFrame: frame => this._receive(frame),
      onStatus: status => this._statusChanged(status),
      beforeReconnect: () => this._resume(sessionId),
      WebSocket: settings.WebSocket
    });
    this._socket.open();
  }

  private _receive(frame: unknown): void {
    if (isServerError(frame)) {
      const message = frame.message;
      // Answers wait for their confirmation: a refusal now is most likely theirs.
      if (this._answers.size > 0) {
        this._settleAll(message);
      } else {
        this._note(message);
      }
      return;
    }
    const before = this.transcript;
    this.transcript = reduce(before, frame);
    if (this.transcript === before) {
      return;
    }
    const event = parseEvent(frame);
    if (event?.type === 'approval_resolved') {
      this._settle(event.payload.approval_id);
    }
    if (event?.type === 'job_update' && event.payload.state.startsWith('RUNNING')) {
      const jobId = event.payload.job_id;
      this._runningSince.set(jobId, this._runningSince.get(jobId) ?? event.ts);
    }
    if (
      event?.type === 'job_update' &&
      event.seq > this._toastAfter &&
      jobEnded(event.payload.state)
    ) {
      this._jobEnded.emit(event.payload);
      const since = this._runningSince.get(event.payload.job_id);
      this.readOut.announce(event.payload, since === undefined ? null : event.ts - since);
      this.desktop.announce(event.payload, since === undefined ? null : event.ts - since);
    }
    this._changed.emit();
  }

  private _statusChanged(status: SocketStatus): void {
    const previous = this.status;
    this.status = status;
    if (status === 'reconnecting') {
      this.transcript = markDisconnected(this.transcript);
      this._settleAll('The connection dropped before Betty confirmed the answer.');
    }
    if (status === 'open' && previous === 'reconnecting') {
      void this._reviveApprovals();
    }
    this._changed.emit();
  }

  /** Before a reconnect: the session again (a restarted server resumes it), and where its stream is. */
  private async _resume(sessionId: string): Promise<void> {
    const session = await this._api.openSession({
      session_id: sessionId,
      cluster: this.cluster ?? undefined
    });
    if (this.session?.session_id !== sessionId) {
      return;
    }
    this.session = session;
    this.transcript = restartStream(this.transcript, session.last_seq);
    this._changed.emit();
  }

  private async _reviveApprovals(): Promise<void> {
    const session = this.session;
    if (session === null) {
      return;
    }
    try {
      const { approvals } = await this._api.approvals(session.session_id);
      if (this.session === session) {
        this.transcript = reviveApprovals(
          this.transcript,
          approvals.map(approval => approval.approval_id)
        );
        this._changed.emit();
      }
    } catch {
      // The cards stay expired: the server cancelled them, or will answer the next try.
    }
  }

  /** The answer to `approvalId` is confirmed (no `error`) or refused. */
  private _settle(approvalId: string, error?: string): void {
    const waiting = this._answers.get(approvalId);
    if (waiting === undefined) {
      return;
    }
    this._answers.delete(approvalId);
    clearTimeout(waiting.timer);
    if (error === undefined) {
      waiting.resolve();
    } else {
      waiting.reject(new Error(error));
    }
  }

  private _settleAll(error: string): void {
    for (const approvalId of [...this._answers.keys()]) {
      this._settle(approvalId, error);
    }
  }

  private _note(text: string): void {
    this.transcript = addNote(this.transcript, text);
    this._changed.emit();
  }

  private _fail(message: string): void {
    this.error = message;
    this.status = 'closed';
    this._changed.emit();
  }
}

/** How long an answer sent on the socket waits for the server's confirmation. */
const ANSWER_TIMEOUT_MS = 15_000;

/** An answer sent on the socket, waiting for its `approval_resolved` event. */
interface IAnswerWaiting {
  resolve: () => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}
