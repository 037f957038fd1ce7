/**
 * The whole side panel: the questions of logins waiting on the person (when there are any),
 * the header, the approvals other sessions wait on (MCP clients', automations'), then the
 * Chat, Jobs, Cluster, Experiments, Automations, GPU and Timeline tabs.
 * Every tab stays mounted (hidden when not shown), so a draft prompt or a scroll position
 * survives a look at the jobs.
 */
import * as React from 'react';

import { IPlacement } from '../api';
import { BettyModel, Tab } from '../model';
import { INodeKernel } from '../models';
import { othersThan } from '../waiting';
import { AutomationsView } from './AutomationsView';
import { useChanges } from './changes';
import { ChatList } from './ChatList';
import { ChatView } from './ChatView';
import { ClusterView } from './ClusterView';
import { CostMeter } from './CostMeter';
import { ExperimentsView } from './ExperimentsView';
import { GpuView } from './GpuView';
import { Header } from './Header';
import { JobsView } from './JobsView';
import { NodeKernelsView } from './NodeKernelsView';
import { TimelineTab } from './TimelineView';
import { LoginQuestionsView } from './LoginQuestionCard';
import { ReadOutBar } from './ReadOutBar';
import { SweepsView } from './SweepsView';
import { WaitingApprovalsView } from './WaitingApprovalsView';

/** Props of {@link BettyApp}. */
export interface IBettyAppProps {
  model: BettyModel;
  /** Open a workspace file in JupyterLab. */
  onOpen: (path: string) => void;
}

const TABS: { id: Tab; label: string }[] = [
  { id: 'chat', label: 'Chat' },
  { id: 'jobs', label: 'Jobs' },
  { id: 'cluster', label: 'Cluster' },
  { id: 'experiments', label: 'Experiments' },
  { id: 'automations', label: 'Automations' },
  { id: 'gpu', label: 'GPU' },
  { id: 'timeline', label: 'Timeline' }
];

/** The side panel's content, rendered from `model`. */
export function BettyApp({ model, onOpen }: IBettyAppProps): JSX.Element {
  const loaders = React.useMemo(
    () => ({
      loadJobs: (cluster: string) => model.api.myJobs(cluster),
      loadExperiments: () => model.api.experiments(),
      loadPipeline: (slug: string) => model.api.pipeline(slug),
      cancel: (jobId: string) => model.cancelJob(jobId),
      extend: (jobId: string) => model.extendJob(jobId),
      loadHistory: (cluster: string) => model.api.history(cluster, 'now-7days'),
      loadEfficiency: (cluster: string, jobIds: string[]) => model.api.efficiency(cluster, jobIds),
      loadOverview: (cluster: string) => model.api.clusterOverview(cluster),
      resubmit: (jobId: string, placement?: IPlacement) => model.resubmitJob(jobId, placement),
      loadWhy: (cluster: string, jobId: string) => model.api.whyPending(cluster, jobId),
      loadNodeKernels: (cluster: string) => model.api.nodeKernels(cluster),
      stopNodeKernel: (kernel: INodeKernel, cluster: string) => model.api.stopNodeKernel(kernel, cluster),
      loadSweeps: () => model.api.sweeps(),
      loadSweep: (slug: string) => model.api.sweepComparison(slug),
      sweepAction: (tool: string, args: Record<string, unknown>) => model.startInChat(tool, args),
      fetchResult: (slug: string) => model.startInChat('notebook_collect', { experiment: slug }),
      loadUsage: () => model.api.costMeter()
    }),
    [model]
  );
  // Automation runs ask in sessions of their own, not the chat's: the Automations tab counts them.
  const [automationsPending, setAutomationsPending] = React.useState(0);
  useChanges(model.waiting);
  const waitingForYou = waitingCount(model);
  const shown = (tab: Tab) => model.visible && model.tab === tab;
  return (
    <div className="betty-App" data-testid="betty-app">
      <LoginQuestionsView logins={model.logins} />
      <Header
        api={model.api}
        clusters={model.clusters}
        cluster={model.cluster}
        mode={model.session?.mode ?? null}
        allowedModes={model.session?.allowed_modes}
        sitePolicy={model.session?.site_policy}
        status={model.status}
        onCluster={name => void model.switchCluster(name)}
        onMode={mode => void model.setMode(mode)}
        onNewChat={() => void model.newChat()}
      />
      {model.error && (
        <div className="betty-App-error" role="alert" data-testid="betty-error">
          {model.error}
        </div>
      )}
      <ReadOutBar readOut={model.readOut} />
      <WaitingApprovalsView
        waiting={model.waiting}
        chatSession={model.session?.session_id ?? null}
      />
      <div className="betty-Tabs" role="tablist">
        {TABS.map(tab => (
          <button
            key={tab.id}
            role="tab"
            aria-selected={model.tab === tab.id}
            className={`betty-Tab${model.tab === tab.id ? ' betty-mod-selected' : ''}`}
            data-testid={`betty-tab-${tab.id}`}
            onClick={() => model.setTab(tab.id)}
          >
            {tab.label}
            {tab.id === 'chat' && waitingForYou > 0 && (
              <span
                className="betty-Tab-badge"
                data-testid="betty-pending-count"
                title="Cards waiting for you: this chat's and those under Waiting for you"
              >
                {waitingForYou}
              </span>
            )}
            {tab.id === 'automations' && automationsPending > 0 && (
              <span className="betty-Tab-badge" data-testid="betty-automations-pending-count">
                {automationsPending}
              </span>
            )}
          </button>
        ))}
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'chat'}>
        <ChatList
          chats={model.chats}
          cluster={model.cluster}
          current={model.session?.session_id ?? null}
          onOpen={sessionId => void model.openChat(sessionId)}
        />
        <ChatView
          transcript={model.transcript}
          hasModel={model.session?.has_model ?? null}
          modelName={model.session?.model ?? null}
          modelSetup={model.session?.model_setup ?? null}
          baseUrl={model.api.settings.baseUrl}
          context={model.notebookContext}
          onSend={(prompt, context) => model.ask(prompt, context)}
          onStop={() => model.stop()}
          onDecide={(id, decision, args, digest) => model.decide(id, decision, args, digest)}
          onOpen={onOpen}
          runNotebook={{
            cluster: model.session?.cluster ?? null,
            environments: model.clusters.find(c => c.name === model.session?.cluster)?.environments,
            unsaved: () => model.notebookContext?.unsaved() ?? false,
            start: args => model.startInChat('notebook_submit', args)
          }}
        />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'jobs'}>
        <CostMeter
          visible={shown('jobs')}
          submissions={submissionCount(model)}
          loadUsage={loaders.loadUsage}
        />
        <NodeKernelsView
          cluster={model.cluster}
          visible={shown('jobs')}
          refreshSeconds={model.settings.jobsRefreshSeconds}
          load={loaders.loadNodeKernels}
          stop={loaders.stopNodeKernel}
        />
        <JobsView
          cluster={model.cluster}
          visible={shown('jobs')}
          refreshSeconds={model.settings.jobsRefreshSeconds}
          loadJobs={loaders.loadJobs}
          loadExperiments={loaders.loadExperiments}
          onCancel={loaders.cancel}
          onExtend={loaders.extend}
          onOpen={onOpen}
          loadHistory={loaders.loadHistory}
          loadEfficiency={loaders.loadEfficiency}
          onResubmit={loaders.resubmit}
          loadWhy={loaders.loadWhy}
        />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'cluster'}>
        <ClusterView
          cluster={model.cluster}
          visible={shown('cluster')}
          loadOverview={loaders.loadOverview}
        />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'experiments'}>
        <SweepsView
          visible={shown('experiments')}
          loadSweeps={loaders.loadSweeps}
          loadComparison={loaders.loadSweep}
          onAction={loaders.sweepAction}
        />
        <ExperimentsView
          visible={shown('experiments')}
          loadExperiments={loaders.loadExperiments}
          onOpen={onOpen}
          onResubmit={loaders.resubmit}
          onFetchResult={loaders.fetchResult}
          loadPipeline={loaders.loadPipeline}
        />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'automations'}>
        <AutomationsView
          api={model.api}
          visible={shown('automations')}
          watching={model.visible}
          onPendingCount={setAutomationsPending}
        />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'gpu'}>
        <GpuView api={model.api} visible={shown('gpu')} />
      </div>
      <div className="betty-TabPanel" role="tabpanel" hidden={model.tab !== 'timeline'}>
        <TimelineTab settings={model.api.settings} visible={shown('timeline')} />
      </div>
    </div>
  );
}

/** The calls that submit jobs: each one that ran changes what the cost meter shows. */
const SUBMITTING = new Set([
  'cluster_submit',
  'cluster_sweep',
  'sweep_round',
  'sweep_retry',
  'cluster_pipeline',
  'cluster_extend',
  'cell_run',
  'notebook_submit'
]);

/** How many submissions of the chat ran (the cost meter reads again after each). */
function submissionCount(model: BettyModel): number {
  return model.transcript.items.filter(
    item => item.kind === 'tool' && item.result?.ok === true && SUBMITTING.has(item.tool)
  ).length;
}

/** The cards waiting for a person: the chat's own, and every other session's (Waiting for you). */
function waitingCount(model: BettyModel): number {
  const chat = model.transcript.items.filter(
    item => item.kind === 'approval' && item.status === 'pending'
  ).length;
  return chat + othersThan(model.waiting.approvals, model.session?.session_id ?? null).length;
}
