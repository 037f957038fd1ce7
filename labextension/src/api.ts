/**
 * Typed calls of Betty's REST API (`docs/server-api.md`); each goes through `requestAPI`.
 */
import { ServerConnection } from '@jupyterlab/services';

import { IContextBulletin, IWorkingPlace } from './contract/serverApi';
import { PersonDecision } from './events';
import {
  IApprovals,
  IAskAnswer,
  IAutomation,
  IAutomationRunTranscript,
  IAutomationRuns,
  IAutomations,
  ICallStarted,
  IDecisionRequest,
  IClusterHealth,
  IClusterOverview,
  IClusters,
  IEditPreview,
  IEditRequest,
  IExperiments,
  IKilledRuns,
  ILoginQuestions,
  INodeKernel,
  INodeKernels,
  INotebookStatuses,
  IOpenNotebooksRequest,
  IOutcome,
  IPipelineGraph,
  IResolution,
  IResubmitRequest,
  IRunQueued,
  ISession,
  ISessionRequest,
  ISitePolicyView,
  IStartEstimate,
  ISweepComparison,
  ISweeps,
  Mode
} from './models';
import { requestAPI } from './request';

/** Where a job moves when resubmitted: a placement `cluster_why` named (its partition and GPU type). */
export interface IPlacement {
  partition: string;
  gpu_type: string | null;
}

/** One job's shape as the GPU tab asks about it (arguments of `gpu_estimate`). */
export interface IGpuJob {
  model: string;
  method: 'inference' | 'full' | 'lora' | 'qlora';
  batch_size: number;
  seq_len: number;
  gpus: number;
  gpu?: string;
  trace: boolean;
  /** A training recipe (the form's advanced select): the `gpu_estimate` options it sets. */
  grad_ckpt?: 'none' | 'selective' | 'op' | 'layer' | 'full';
  ckpt_every?: number;
  optimizer?: 'adamw' | 'adamw8bit' | 'paged-adamw' | 'paged-adamw8bit' | 'sgd' | 'adafactor';
  optimizer_in_backward?: boolean;
  chunked_loss?: boolean;
  sharding?: 'none' | 'ddp' | 'fsdp' | 'zero1' | 'zero2' | 'zero3';
  offload?: 'none' | 'optimizer' | 'params';
  fsdp_mixed_precision?: boolean;
}

/** Betty's server extension, as the side panel calls it. */
export class BettyAPI {
  /** `settings` default to the page's own Jupyter server. */
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** The configured clusters. */
  clusters(): Promise<IClusters> {
    return this.get('clusters');
  }

  /** Whether Betty can use `cluster` now (reached, host key known, Slurm answers), and if not why. */
  clusterHealth(cluster: string): Promise<IClusterHealth> {
    return this.get(`clusters/${encodeURIComponent(cluster)}/health`);
  }

  /** What `cluster` is doing: partitions by state, the queue, the person's share (kept a few seconds by the server). */
  clusterOverview(cluster: string): Promise<IClusterOverview> {
    return this.get(`clusters/${encodeURIComponent(cluster)}/overview`);
  }

  /**
   * The site's policy in effect with the cost meter: each budgeted account's use this month
   * (`usage`, absent where the site sets no budgets), read from the default cluster's accounting.
   */
  costMeter(): Promise<ISitePolicyView> {
    return this.get('policy?usage=1');
  }

  /** A new session, or the kept one `request.session_id` resumed. */
  openSession(request: ISessionRequest): Promise<ISession> {
    return this.send('sessions', 'POST', request);
  }

  /** One open session. */
  session(sessionId: string): Promise<ISession> {
    return this.get(`sessions/${encodeURIComponent(sessionId)}`);
  }

  /** Switch the session's agent between off, propose, confirm and auto. */
  setMode(sessionId: string, mode: Mode): Promise<ISession> {
    return this.send(`sessions/${encodeURIComponent(sessionId)}/mode`, 'PUT', { mode });
  }

  /** Start the agent on `prompt`, with the context bulletin the person saw (when the socket is down). */
  ask(sessionId: string, prompt: string, context: IContextBulletin | null = null): Promise<IAskAnswer> {
    const body = context === null ? { prompt } : { prompt, context };
    return this.send(`sessions/${encodeURIComponent(sessionId)}/ask`, 'POST', body);
  }

  /** Stop the agent's turn; the session's open approvals are cancelled. */
  stop(sessionId: string): Promise<{ stopped: boolean }> {
    return this.send(`sessions/${encodeURIComponent(sessionId)}/stop`, 'POST', {});
  }

  /** The approvals of the session open now. */
  approvals(sessionId: string): Promise<IApprovals> {
    return this.get(`approvals?session=${encodeURIComponent(sessionId)}`);
  }

  /** Every approval waiting for a person now, of every session, each with its session and task. */
  waitingApprovals(): Promise<IApprovals> {
    return this.get('approvals');
  }

  /**
   * Answer an approval as the side panel (the action log names it so); `args` only with `edited`;
   * `digest`: the card the person saw (the server refuses an answer to any other card).
   */
  decide(
    approvalId: string,
    decision: PersonDecision,
    args?: Record<string, unknown>,
    digest?: string
  ): Promise<IResolution> {
    const body: IDecisionRequest = {
      decision,
      face: 'side panel',
      ...(decision === 'edited' ? { args } : {}),
      ...(digest ? { digest } : {})
    };
    return this.send(`approvals/${encodeURIComponent(approvalId)}`, 'POST', body);
  }

  /**
   * A person's edit of open card `approvalId`, checked by the same code as the model's call and
   * previewed again; nothing runs. Rejects with the one-line reason when the edit is refused.
   */
  repreview(approvalId: string, args: Record<string, unknown>): Promise<IEditPreview> {
    const body: IEditRequest = { args };
    return this.send(`approvals/${encodeURIComponent(approvalId)}/preview`, 'POST', body);
  }

  /**
   * When and where open submission card `approvalId`'s job would start, one line asked of the
   * scheduler (`''` for a card that submits nothing); a 404 once the card is answered.
   */
  startEstimate(approvalId: string): Promise<IStartEstimate> {
    return this.get(`approvals/${encodeURIComponent(approvalId)}/start`);
  }

  /** What the clusters' login nodes ask now (a second factor), oldest first. */
  loginQuestions(): Promise<ILoginQuestions> {
    return this.get('login-questions');
  }

  /** Hand `answer` to the login waiting on question `id`; a 404 when none waits on it any more. */
  answerLoginQuestion(id: string, answer: string): Promise<{ answered: boolean }> {
    return this.send(loginQuestionPath(id), 'POST', { answer });
  }

  /** Nobody will answer question `id`: its login fails with one line. */
  cancelLoginQuestion(id: string): Promise<{ cancelled: boolean }> {
    return requestAPI(loginQuestionPath(id), { method: 'DELETE' }, this.settings);
  }

  /** The person's own jobs in the queue of `cluster`. */
  myJobs(cluster: string): Promise<IOutcome> {
    return this.get(`jobs?mine=1&cluster=${encodeURIComponent(cluster)}`);
  }

  /** Ask to cancel a job of `cluster` in `sessionId`: its approval card arrives as an event there. */
  cancelJob(jobId: string, sessionId: string, cluster: string): Promise<ICallStarted> {
    return this.send(`jobs/${encodeURIComponent(jobId)}/cancel`, 'POST', {
      session_id: sessionId,
      cluster,
      face: 'side panel'
    });
  }

  /**
   * Ask to give a running job Betty recorded on `cluster` more time: a `cluster_extend` card (continuations queued
   * behind it) arrives as an event in `sessionId`; nothing is queued until a person approves it.
   */
  extendJob(jobId: string, sessionId: string, cluster: string, segments = 1): Promise<ICallStarted> {
    return this.send(`jobs/${encodeURIComponent(jobId)}/extend`, 'POST', {
      segments,
      session_id: sessionId,
      cluster,
      face: 'side panel'
    });
  }

  /**
   * Resubmit a job Betty recorded on `cluster`: a `cluster_submit` card with its script arrives
   * as an event in `sessionId`; nothing is submitted until a person approves it. With `placement`
   * (one `cluster_why` named), the script is moved there: only its partition and GPU type change.
   */
  resubmitJob(jobId: string, sessionId: string, cluster: string, placement?: IPlacement): Promise<ICallStarted> {
    const body: IResubmitRequest = {
      session_id: sessionId,
      cluster,
      face: 'side panel',
      ...(placement ? { partition: placement.partition, gpu_type: placement.gpu_type } : {})
    };
    return this.send(`jobs/${encodeURIComponent(jobId)}/resubmit`, 'POST', body);
  }

  /** Why the person's pending job `jobId` on `cluster` waits (`cluster_why`'s outcome: its data holds the lines). */
  whyPending(cluster: string, jobId: string): Promise<IOutcome> {
    return this.get(`clusters/${encodeURIComponent(cluster)}/jobs/${encodeURIComponent(jobId)}/why`);
  }

  /** The person's running node kernels (`%betty kernel`) on `cluster`, with their time left. */
  nodeKernels(cluster: string): Promise<INodeKernels> {
    return this.get(`node-kernels?cluster=${encodeURIComponent(cluster)}`);
  }

  /** Stop a node kernel: the person's own click (after the panel's confirm dialog) cancels its allocation. */
  stopNodeKernel(kernel: INodeKernel, cluster: string): Promise<IOutcome> {
    return this.send(`node-kernels/${encodeURIComponent(kernel.kernel)}/stop`, 'POST', {
      job_id: kernel.job_id,
      cluster
    });
  }

  /** The partitions of `cluster` (`cluster_partitions`'s outcome: a table). */
  partitions(cluster: string): Promise<IOutcome> {
    return this.get(`partitions?cluster=${encodeURIComponent(cluster)}`);
  }

  /** The person's jobs of `cluster` in accounting since `since` (`now-7days`), finished ones included. */
  history(cluster: string, since: string): Promise<IOutcome> {
    return this.get(
      `jobs/history?cluster=${encodeURIComponent(cluster)}&since=${encodeURIComponent(since)}`
    );
  }

  /** What the finished jobs `jobIds` of `cluster` used of what they asked for (`cluster_efficiency`: one sacct). */
  efficiency(cluster: string, jobIds: string[]): Promise<IOutcome> {
    const ids = jobIds.map(encodeURIComponent).join(',');
    return this.get(`jobs/efficiency?cluster=${encodeURIComponent(cluster)}&ids=${ids}`);
  }

  /** The built-in model catalog of the GPU estimate. */
  gpuModels(): Promise<{ models: { name: string }[] }> {
    return this.get('gpu/models');
  }

  /** Peak GPU memory of one job (`gpu_estimate`); with `trace`, the real step traced on meta tensors too. */
  gpuEstimate(args: IGpuJob): Promise<IOutcome> {
    return this.send('gpu/estimate', 'POST', args);
  }

  /** The experiments recorded in the workspace, with their jobs' states. */
  experiments(): Promise<IExperiments> {
    return this.get('experiments');
  }

  /** A recorded pipeline's steps, each with its state and edges, as the ledger has them. */
  pipeline(slug: string): Promise<IPipelineGraph> {
    return this.get(`experiments/${encodeURIComponent(slug)}/pipeline`);
  }

  /** Every recorded sweep, oldest first. */
  sweeps(): Promise<ISweeps> {
    return this.get('sweeps');
  }

  /** One sweep's comparison (`sweep_compare`): its table as text and its pictures. */
  sweepComparison(slug: string): Promise<ISweepComparison> {
    return this.get(`sweeps/${encodeURIComponent(slug)}`);
  }

  /**
   * Start `tool` with `args` in session `sessionId` as the person's own call from the panel,
   * without waiting: a tier-2 tool's card arrives as an event and waits for approval there.
   */
  startCall(sessionId: string, tool: string, args: Record<string, unknown>): Promise<ICallStarted> {
    const path = `sessions/${encodeURIComponent(sessionId)}/tools/${encodeURIComponent(tool)}`;
    return this.send(path, 'POST', { args, wait: false, face: 'side panel' });
  }

  /**
   * Say which notebooks this JupyterLab page (`holder`) has open now, so Betty leaves their
   * files alone; the answer has the status line of each that is an experiment's.
   */
  openNotebooks(holder: string, notebooks: string[]): Promise<INotebookStatuses> {
    const body: IOpenNotebooksRequest = { holder, notebooks };
    return this.send('notebooks/open', 'PUT', body);
  }

  /** Say how approved cell change `changeId` went in the open notebook (one line). */
  changeResult(changeId: string, result: string): Promise<Record<string, never>> {
    return this.send(`notebooks/changes/${encodeURIComponent(changeId)}`, 'POST', { result });
  }

  /** The folder of notebook `path` and its git branch, for the context chip. */
  workingPlace(path: string): Promise<IWorkingPlace> {
    return this.get(`notebooks/context?path=${encodeURIComponent(path)}`);
  }

  /** Every automation, oldest first. */
  automations(): Promise<IAutomations> {
    return this.get('automations');
  }

  /** The newest `limit` runs of an automation, with what each used. */
  automationRuns(automationId: string, limit = 20): Promise<IAutomationRuns> {
    return this.get(`${automationPath(automationId)}/runs?limit=${limit}`);
  }

  /** One run of an automation and its transcript (its session's events, every attempt). */
  automationRun(automationId: string, runId: string): Promise<IAutomationRunTranscript> {
    return this.get(`${automationPath(automationId)}/runs/${encodeURIComponent(runId)}`);
  }

  /** Hold an automation: triggers stop firing, a running run waits before its next tool call. */
  pauseAutomation(automationId: string): Promise<IAutomation> {
    return this.send(`${automationPath(automationId)}/pause`, 'POST', {});
  }

  /** Let a paused or error-suspended automation work again. */
  resumeAutomation(automationId: string): Promise<IAutomation> {
    return this.send(`${automationPath(automationId)}/resume`, 'POST', {});
  }

  /** Queue a run of an automation now. */
  runAutomation(automationId: string): Promise<IRunQueued> {
    return this.send(`${automationPath(automationId)}/run`, 'POST', {});
  }

  /** The kill switch: queued runs end at once, the running one within the step it is in. */
  killAutomation(automationId: string): Promise<IKilledRuns> {
    return this.send(`${automationPath(automationId)}/kill`, 'POST', {});
  }

  private get<T>(endpoint: string): Promise<T> {
    return requestAPI<T>(endpoint, { method: 'GET' }, this.settings);
  }

  private send<T>(endpoint: string, method: string, body: unknown): Promise<T> {
    return requestAPI<T>(endpoint, { method, body: JSON.stringify(body) }, this.settings);
  }
}

function automationPath(automationId: string): string {
  return `automations/${encodeURIComponent(automationId)}`;
}

function loginQuestionPath(id: string): string {
  return `login-questions/${encodeURIComponent(id)}`;
}
