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
