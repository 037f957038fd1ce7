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
