/**
 * Wire models of Betty's REST API and chat socket (`docs/server-api.md`), mirroring
 * `betty_jupyter/server/models.py` one to one. Events are in `events.ts`.
 */
import { IApprovalRequest, PersonDecision } from './events';

/** Answer of `GET /betty/api/health`. */
export interface IHealth {
  status: 'ok';
  version: string;
  clusters: string[];
  default_cluster: string | null;
}

/** How much the agent may do by itself. */
export type Mode = 'off' | 'propose' | 'confirm' | 'auto';

/** The modes, from the most careful to the most trusting. */
export const MODES: readonly Mode[] = ['off', 'propose', 'confirm', 'auto'];

/** A configured cluster (`GET clusters`). */
export interface ICluster {
  name: string;
  transport: string;
  host: string;
  default: boolean;
}

/** Answer of `GET clusters`. */
export interface IClusters {
  clusters: ICluster[];
}

/** Answer of `POST clusters/{name}/test`; `fingerprint` only for an unknown host key. */
export interface IClusterCheck {
  ok: boolean;
  message: string;
  fingerprint?: string;
}

/** A chat session (`POST sessions`, `GET sessions/{id}`, `PUT sessions/{id}/mode`). */
export interface ISession {
  session_id: string;
  cluster: string;
  mode: Mode;
  busy: boolean;
  last_seq: number;
  has_model: boolean;
  /** The person's login name on the session's cluster (null when it did not say). */
  user?: string | null;
}

/** Body of `POST sessions`. */
export interface ISessionRequest {
  cluster?: string;
  mode?: Mode;
  session_id?: string;
  /** The other agent a new session works for (an MCP client), named on its cards. */
  agent?: string;
}

/** A tool outcome's data, tagged with its kind; a frame is pandas' `orient="table"` JSON. */
export type OutcomeData =
  { kind: 'frame'; value: string } | { kind: 'experiment' | 'job' | 'json'; value: unknown };

/** What a tool did (`GET jobs`, `GET partitions`, …). */
export interface IOutcome {
  ok: boolean;
  summary: string;
  artifacts: string[];
  data: OutcomeData | null;
}

/** Answer of `POST sessions/{id}/ask`. */
export interface IAskAnswer {
  after: number;
}

/** A call started without waiting (`jobs/{id}/cancel`): it runs in `session_id`, its card arrives there. */
export interface ICallStarted {
  call_id: string;
  session_id: string;
}

/** Answer of `GET approvals?session=ID`: the approvals open now, oldest first. */
export interface IApprovals {
  approvals: IApprovalRequest[];
}

/** Body of `POST approvals/{id}`. */
export interface IDecisionRequest {
  decision: PersonDecision;
  args?: Record<string, unknown>;
}

/** Answer of `POST approvals/{id}`. */
export interface IResolution {
  decision: string;
  approver: string | null;
  args: Record<string, unknown> | null;
  reason: string | null;
}

/**
 * A question a cluster's login node asks while Betty logs in to it (`GET login-questions`),
 * such as a second factor's `Verification code: `. It waits in the server until a person
 * answers it (`POST login-questions/{id}`) or cancels the login (`DELETE`).
 */
export interface ILoginQuestion {
  id: string;
  /** The cluster that asks, as its connection names it (the host alias). */
  cluster: string;
  /** The login node's own words: text from another host, shown only as text. */
  prompt: string;
  /** Whether what the person types may be shown (false: a password field). */
  echo: boolean;
  /** What the login node says before its question (often empty). */
  instructions: string;
  /** When it was asked (unix seconds). */
  asked_at: number;
}

/** Answer of `GET login-questions`: the questions waiting now, oldest first. */
export interface ILoginQuestions {
  questions: ILoginQuestion[];
}

/** A recorded experiment with the state its job was last seen in (`GET experiments`). */
export interface IExperiment {
  slug: string;
  job_id: string;
  cluster: string;
  submitted: string;
  goal: string;
  script?: string;
  script_path?: string;
  partition?: string | null;
  resources?: Record<string, unknown>;
  gpu_estimate?: Record<string, unknown> | null;
  state: string;
  finished: boolean;
  /** The wiki page, relative to the wiki (`experiments/<slug>.md`). */
  page?: string;
  /** The notebook, relative to the workspace. */
  notebook?: string;
}

/** Answer of `GET experiments`. */
export interface IExperiments {
  experiments: IExperiment[];
}

/** What starts an automation's run: a watched job's change, a schedule, a webhook, a person. */
export type TriggerKind = 'job' | 'schedule' | 'webhook' | 'manual';

/** A trigger: `states` and `cluster` for a job, `cron` for a schedule, `template` for a webhook. */
export interface IAutomationTrigger {
  kind: TriggerKind;
  states?: string[];
  cluster?: string | null;
  cron?: string | null;
  template?: string | null;
}

/** The circuit breakers of each run: model turns, tokens and wall time. */
export interface IAutomationLimits {
  iterations: number;
  tokens: number;
  seconds: number;
}

/** What a person defines (the body of `POST` and `PUT automations`). */
export interface IAutomationSpec {
  name: string;
  persona?: string;
  prompt: string;
  trigger?: IAutomationTrigger;
  cluster?: string | null;
  tools?: string[] | null;
  limits?: IAutomationLimits;
  mode?: 'propose' | 'confirm' | 'auto';
}

/** Where an automation stands: waiting, running, held by a person, or stopped after failures. */
export type AutomationStatus = 'idle' | 'active' | 'paused' | 'error-suspended';

/** A stored automation (`GET automations`, `GET automations/{id}`, pause and resume). */
export interface IAutomation extends IAutomationSpec {
  id: string;
  trigger: IAutomationTrigger;
  status: AutomationStatus;
  /** Runs that failed or tripped a breaker in a row. */
  failures: number;
  /** Whether it has a webhook secret. */
  webhook: boolean;
  /** A schedule's next firing (unix seconds). */
  next_due: number | null;
  created: number;
  updated: number;
}

/** Answer of `GET automations`, oldest first. */
export interface IAutomations {
  automations: IAutomation[];
}

/** Where a run stands. */
export type RunStatus = 'queued' | 'running' | 'done' | 'failed' | 'breaker' | 'killed';

/** One run of an automation: what fired it, where it stands, what it used and how it ended. */
export interface IAutomationRun {
  id: string;
  automation: string;
  status: RunStatus;
  trigger: TriggerKind;
  delivery_id: string | null;
  payload: unknown;
  attempts: number;
  /** The run's agent session (`automation-<run id>`): its approvals are asked there. */
  session_id: string;
  tokens: number;
  iterations: number;
  seconds: number;
  /** A breaker's `iteration_limit`, `token_limit` or `time_limit`, or why the run failed. */
  code: string | null;
  result: string;
  created: number;
  started: number | null;
  ended: number | null;
  owner: string | null;
  lease_until: number;
  heartbeat: number | null;
  kill_requested: boolean;
  /** The tool whose call waits while the automation is paused. */
  paused_before: string | null;
}

/** Answer of `GET automations/{id}/runs`, newest first. */
export interface IAutomationRuns {
  runs: IAutomationRun[];
}

/** One line of a run's transcript: an event of its session, with the attempt it belongs to. */
export interface IRunEvent {
  /** `seq` starts again at 1 with each attempt. */
  attempt: number;
  type: string;
  session_id: string;
  seq: number;
  ts: number;
  payload: unknown;
}

/** Answer of `GET automations/{id}/runs/{run}`: the run and its session's events. */
export interface IAutomationRunTranscript extends IAutomationRun {
  events: IRunEvent[];
}

/** Answer of `POST automations/{id}/run`. */
export interface IRunQueued {
  run_id: string;
  status: RunStatus;
}

/** Answer of `POST automations/{id}/kill`: the queued and running runs it stopped. */
export interface IKilledRuns {
  killed: string[];
}

/** `{"type": "ask", "prompt": …}`: start the agent. */
export interface IAskMessage {
  type: 'ask';
  prompt: string;
}

/** `{"type": "approval", "approval_id": …, "decision": …, "args": …?}`: answer a card. */
export interface IApprovalMessage {
  type: 'approval';
  approval_id: string;
  decision: PersonDecision;
  args?: Record<string, unknown> | null;
}

/** `{"type": "stop"}`: stop the agent's answer. */
export interface IStopMessage {
  type: 'stop';
}

/** Any message the panel sends over the chat socket, tagged by `type`. */
export type SocketMessage = IAskMessage | IApprovalMessage | IStopMessage;

/** The server's answer to a bad socket message: not an event, no `seq`; nothing changed. */
export interface ISocketError {
  type: 'error';
  message: string;
}

/** The notebook of an experiment, relative to the workspace (the Jupyter root). */
export function experimentNotebook(experiment: IExperiment): string {
  return experiment.notebook ?? `notebooks/experiments/${experiment.slug}.ipynb`;
}

/** The wiki page of an experiment, relative to the workspace (the Jupyter root): under `wiki/`. */
export function experimentPage(experiment: IExperiment): string {
  const page = experiment.page ?? `experiments/${experiment.slug}.md`;
  return page.startsWith('wiki/') ? page : `wiki/${page}`;
}
