/**
 * Wire models of Betty's REST API and chat socket (`docs/server-api.md`). The types are
 * generated from `betty_jupyter/schemas/server-api.v1.json` (`contract/`, `npm run generate`);
 * this module adds what the panel derives from them. Events are in `events.ts`.
 */
import { IDecisionRequest, IExperiment, IModeRequest, IOutcome } from './contract/serverApi';

export type {
  ColumnType,
  IAccountUse,
  IApprovals,
  IAskAnswer,
  IAskMessage,
  IApprovalMessage,
  IAutomation,
  IAutomationLimits,
  IAutomationRun,
  IAutomationRunTranscript,
  IAutomationRuns,
  IAutomations,
  IAutomationSpec,
  IAutomationTrigger,
  ICallStarted,
  ICluster,
  IClusterCheck,
  IClusterHealth,
  IClusterOverview,
  IClusters,
  IColumn,
  IDecisionRequest,
  IEditPreview,
  IEditRequest,
  IExperiment,
  IExperiments,
  IHealth,
  IKilledRuns,
  ILoginQuestion,
  ILoginQuestions,
  INotebookStatus,
  INotebookStatuses,
  IOpenNotebooksRequest,
  IOutcome,
  IOverviewData,
  IPartitionLoad,
  IPipelineEdge,
  IPipelineGraph,
  IPipelineStep,
  IResolution,
  IResubmitRequest,
  IRunEvent,
  IRunQueued,
  IServerError,
  ISession,
  ISessionRequest,
  IShare,
  ISitePolicyView,
  IStartEstimate,
  IStopMessage,
  ISweep,
  ISweepChart,
  ISweepComparison,
  ISweeps,
  ITable,
  IWaitingApproval,
  LinkProblem,
  SocketMessage
} from './contract/serverApi';

/** How much the agent may do by itself. */
export type Mode = IModeRequest['mode'];

/** The modes, from the most careful to the most trusting. */
export const MODES: readonly Mode[] = ['off', 'propose', 'confirm', 'auto'];

/** The decisions a person can send from an approval card. */
export type PersonDecision = IDecisionRequest['decision'];

/** A tool outcome's data, tagged with its kind (`table`, `experiment`, `job`, `json`). */
export type OutcomeData = NonNullable<IOutcome['data']>;

/** The notebook of an experiment, relative to the workspace (the Jupyter root). */
export function experimentNotebook(experiment: IExperiment): string {
  return experiment.notebook ?? `notebooks/experiments/${experiment.slug}.ipynb`;
}

/** The wiki page of an experiment, relative to the workspace (the Jupyter root): under `wiki/`. */
export function experimentPage(experiment: IExperiment): string {
  const page = experiment.page ?? `experiments/${experiment.slug}.md`;
  return page.startsWith('wiki/') ? page : `wiki/${page}`;
}

/** One of the person's running node kernels (`%betty kernel`), as `GET node-kernels` lists it. */
export interface INodeKernel {
  /** The kernel's token (the stop route's `{token}`). */
  kernel: string;
  job_id: string;
  state: string;
  /** `job 12 RUNNING on n1 · ends at 21:04 (118 min left)` as the server read it. */
  line: string;
  /** When the allocation ends, in the cluster's time (ISO, no zone); null before it starts. */
  ends: string | null;
  /** Seconds left when the server read it; null before it starts. */
  seconds_left: number | null;
  slug: string;
  /** The Jupyter kernel id of the notebook that started it (null when not known). */
  notebook_kernel: string | null;
}

/** `GET node-kernels`: the running node kernels of the project on one cluster. */
export interface INodeKernels {
  cluster: string;
  kernels: INodeKernel[];
}
