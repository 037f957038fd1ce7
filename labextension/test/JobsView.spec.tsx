/**
 * The Jobs tab: refresh while visible, cancel through the chat, open an experiment's files.
 */
import * as React from 'react';
import { act } from 'react';

import { IJobsViewProps, JOBS_PAGE, JobsView } from '../src/components/JobsView';
import { RECENT_FINISHED } from '../src/components/FinishedJobs';
import { ColumnType, IExperiments, IOutcome } from '../src/models';
import { allByTestId, byTestId, click, render } from './render';
import { QUEUE_COLUMNS, tableOf } from './tables';

function queue(...jobs: [string, string][]): IOutcome {
  const records = jobs.map(([job_id, state]) => ({
    job_id,
    array_job_id: job_id.split('_')[0],
    name: `job ${job_id}`,
    partition: 'gpu',
    state,
    reason: '',
    elapsed: 60, // seconds, as betty_jupyter.agent.wire writes durations
    time_limit: 3600,
    gpus: 1,
    gpu_type: 'a100'
  }));
  return {
    ok: true,
    summary: `${jobs.length} jobs`,
    artifacts: [],
    data: { kind: 'table', value: tableOf(QUEUE_COLUMNS, records) },
    text: null
  };
}

const EXPERIMENTS: IExperiments = {
  experiments: [
    {
      slug: '2024-05-01-train',
      job_id: '124',
      cluster: 'dev',
      submitted: '2024-05-01T10:00:00',
      goal: 'train',
      script: '#!/bin/bash\npython train.py',
      script_path: 'scripts/2024-05-01-train.sbatch',
      partition: 'gpu',
      resources: {},
      gpu_estimate: null,
      state: 'RUNNING',
      finished: false,
      page: 'wiki/experiments/2024-05-01-train.md',
      notebook: 'notebooks/experiments/2024-05-01-train.ipynb'
    },
    {
      slug: '2024-05-01-other',
      job_id: '123',
      cluster: 'big',
      submitted: '2024-05-01T10:00:00',
      goal: 'elsewhere',
      script: '#!/bin/bash\npython train.py',
      script_path: 'scripts/2024-05-01-other.sbatch',
      partition: 'gpu',
      resources: {},
      gpu_estimate: null,
      state: 'RUNNING',
      finished: false,
      page: 'wiki/experiments/2024-05-01-other.md',
      notebook: 'notebooks/experiments/2024-05-01-other.ipynb'
    }
  ]
};

function props(overrides: Partial<IJobsViewProps> = {}): IJobsViewProps {
  return {
    cluster: 'dev',
    visible: true,
    refreshSeconds: 15,
    loadJobs: jest.fn().mockResolvedValue(queue(['123', 'RUNNING'], ['124_2', 'PENDING'])),
    loadExperiments: jest.fn().mockResolvedValue(EXPERIMENTS),
    onCancel: jest.fn().mockResolvedValue(undefined),
    onOpen: jest.fn(),
    ...overrides
  };
}

async function settle(ms = 0): Promise<void> {
  await act(async () => {
    await jest.advanceTimersByTimeAsync(ms);
  });
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('JobsView', () => {
  it("lists the person's jobs on the cluster", async () => {
    const p = props();
    const { container } = render(<JobsView {...p} />);
    await settle();
    expect(p.loadJobs).toHaveBeenCalledWith('dev');
    const rows = allByTestId(container, 'betty-job-row');
    expect(rows.map(row => [row.dataset.jobId, row.dataset.state])).toEqual([
      ['123', 'RUNNING'],
      ['124_2', 'PENDING']
    ]);
    expect(rows[0].textContent).toContain('0:01:00 of 1:00:00');
  });

  it('refreshes every interval while visible, and stops when hidden', async () => {
    const p = props({ refreshSeconds: 15 });
    const { rerender } = render(<JobsView {...p} />);
    await settle();
    expect(p.loadJobs).toHaveBeenCalledTimes(1);
    await settle(14_000);
    expect(p.loadJobs).toHaveBeenCalledTimes(1);
    await settle(1_000);
    expect(p.loadJobs).toHaveBeenCalledTimes(2);
    rerender(<JobsView {...p} visible={false} />);
    await settle(60_000);
    expect(p.loadJobs).toHaveBeenCalledTimes(2);
    rerender(<JobsView {...p} visible={true} />);
    await settle();
    expect(p.loadJobs).toHaveBeenCalledTimes(3);
  });

  it('does not load while hidden', async () => {
    const p = props({ visible: false });
    render(<JobsView {...p} />);
    await settle(60_000);
    expect(p.loadJobs).not.toHaveBeenCalled();
  });

  it('asks to cancel a job and says where to approve it', async () => {
    const p = props();
    const { container } = render(<JobsView {...p} />);
    await settle();
    const row = allByTestId(container, 'betty-job-row')[1];
    await click(byTestId(row, 'betty-job-cancel'));
    expect(p.onCancel).toHaveBeenCalledWith('124_2');
    expect(row.textContent).toContain('approve it in the chat');
  });

  it('shows why a cancel could not be asked for, and lets the person try again', async () => {
    const p = props({ onCancel: jest.fn().mockRejectedValue(new Error('no chat session')) });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const row = allByTestId(container, 'betty-job-row')[0];
    await click(byTestId(row, 'betty-job-cancel'));
    expect(row.textContent).toContain('no chat session');
    expect(byTestId<HTMLButtonElement>(row, 'betty-job-cancel').disabled).toBe(false);
  });

  it("opens the notebook and page of a job's experiment (its array's, for a task)", async () => {
    const p = props();
    const { container } = render(<JobsView {...p} />);
    await settle();
    const [plain, task] = allByTestId(container, 'betty-job-row');
    // job 123 is an experiment on another cluster: no links here
    expect(allByTestId(plain, 'betty-job-open-notebook')).toHaveLength(0);
    await click(byTestId(task, 'betty-job-open-notebook'));
    await click(byTestId(task, 'betty-job-open-page'));
    expect(p.onOpen).toHaveBeenNthCalledWith(1, 'notebooks/experiments/2024-05-01-train.ipynb');
    expect(p.onOpen).toHaveBeenNthCalledWith(2, 'wiki/experiments/2024-05-01-train.md');
  });

  it("shows the tool's refusal and an empty queue as such", async () => {
    const failing = props({
      loadJobs: jest.fn().mockResolvedValue({
        ok: false,
        summary: 'squeue failed: slurm_load_jobs error',
        artifacts: [],
        data: null
      })
    });
    const { container } = render(<JobsView {...failing} />);
    await settle();
    expect(byTestId(container, 'betty-jobs-error').textContent).toBe(
      'squeue failed: slurm_load_jobs error'
    );
    const empty = props({ loadJobs: jest.fn().mockResolvedValue(queue()) });
    const second = render(<JobsView {...empty} />);
    await settle();
    expect(byTestId(second.container, 'betty-jobs-empty')).toBeTruthy();
  });
});

describe('JobsView: 20,000 jobs, a page at a time', () => {
  const HOSTILE = '<img src=x onerror="alert(1)"><b>sweep</b>';

  // 20,000 rows: job 1000 + i, every 1000th running, row 150 with a hostile name, and the
  // last row a pending array of 1000 tasks.
  function bigQueue(size = 20_000): IOutcome {
    const array = (i: number) => i === size - 1;
    const records = Array.from({ length: size }, (_, i) => ({
      job_id: array(i) ? '8_[0-999%10]' : String(1000 + i),
      array_job_id: array(i) ? '8' : String(1000 + i),
      name: i === 150 ? HOSTILE : `job ${1000 + i}`,
      partition: 'gpu',
      state: !array(i) && i % 1000 === 999 ? 'RUNNING' : 'PENDING',
      reason: '',
      elapsed: 0,
      time_limit: 3600,
      gpus: 0,
      gpu_type: '',
      tasks: array(i) ? 1000 : 1
    }));
    return {
      ok: true,
      summary: '20000 jobs',
      artifacts: [],
      data: { kind: 'table', value: tableOf(QUEUE_COLUMNS, records) },
      text: null
    };
  }

  async function shown(size = 20_000): Promise<HTMLElement> {
    const p = props({ loadJobs: jest.fn().mockResolvedValue(bigQueue(size)) });
    const { container } = render(<JobsView {...p} />);
    await settle();
    return container;
  }

  const ids = (container: HTMLElement) =>
    allByTestId(container, 'betty-job-row').map(row => row.dataset.jobId);
  const pager = (container: HTMLElement) => byTestId(container, 'betty-jobs-pager');

  it('puts one page of rows in the page, and pages on and back', async () => {
    const container = await shown();
    expect(ids(container)).toHaveLength(JOBS_PAGE);
    expect(ids(container)[0]).toBe('1000');
    expect(byTestId(pager(container), 'betty-pager-range').textContent).toBe('rows 1–100 of 20,000');
    const previous = byTestId<HTMLButtonElement>(pager(container), 'betty-pager-previous');
    const next = byTestId<HTMLButtonElement>(pager(container), 'betty-pager-next');
    expect(previous.disabled).toBe(true);
    await click(next);
    expect(ids(container)).toHaveLength(JOBS_PAGE);
    expect(ids(container)[0]).toBe('1100');
    expect(ids(container)[JOBS_PAGE - 1]).toBe('1199');
    expect(byTestId(pager(container), 'betty-pager-range').textContent).toBe('rows 101–200 of 20,000');
    await click(previous);
    expect(ids(container)[0]).toBe('1000');
    expect(previous.disabled).toBe(true);
  });

  it('ends on a short last page, and keeps within the list when it shrinks', async () => {
    const loadJobs = jest.fn().mockResolvedValue(bigQueue(250));
    const { container } = render(<JobsView {...props({ loadJobs })} />);
    await settle();
    const next = byTestId<HTMLButtonElement>(pager(container), 'betty-pager-next');
    await click(next);
    await click(next);
    expect(next.disabled).toBe(true);
    expect(ids(container)).toHaveLength(50);
    expect(ids(container).slice(-2)).toEqual(['1248', '8_[0-999%10]']);
    expect(byTestId(pager(container), 'betty-pager-range').textContent).toBe('rows 201–250 of 250');
    loadJobs.mockResolvedValue(bigQueue(120));
    await click(byTestId(container, 'betty-jobs-refresh'));
    expect(ids(container)).toHaveLength(20);
    expect(byTestId(pager(container), 'betty-pager-range').textContent).toBe('rows 101–120 of 120');
  });

  it('counts each task of a pending array in the summary', async () => {
    const container = await shown();
    const summary = byTestId(container, 'betty-jobs-summary');
    expect(summary.dataset.jobs).toBe('20999');
    expect(summary.textContent).toBe('20,999 jobs: 20,980 PENDING, 19 RUNNING');
  });

  it('filters by state across every row, from the first page', async () => {
    const container = await shown();
    await click(byTestId(pager(container), 'betty-pager-next'));
    choose(byTestId<HTMLSelectElement>(container, 'betty-jobs-filter'), 'RUNNING');
    expect(ids(container)).toEqual(Array.from({ length: 19 }, (_, k) => String(1999 + 1000 * k)));
    expect(allByTestId(container, 'betty-jobs-pager')).toHaveLength(0);
    choose(byTestId<HTMLSelectElement>(container, 'betty-jobs-filter'), '');
    expect(ids(container)[0]).toBe('1000');
    expect(byTestId(pager(container), 'betty-pager-range').textContent).toBe('rows 1–100 of 20,000');
  });

  it('shows a hostile job name on a later page as text', async () => {
    const container = await shown();
    await click(byTestId(pager(container), 'betty-pager-next'));
    const row = allByTestId(container, 'betty-job-row').find(each => each.dataset.jobId === '1150')!;
    expect(row.textContent).toContain(HOSTILE);
    expect(row.querySelector('img, b')).toBeNull();
  });

  it('keeps a cancel asked for while paging away and back', async () => {
    const container = await shown();
    await click(byTestId(allByTestId(container, 'betty-job-row')[3], 'betty-job-cancel'));
    await click(byTestId(pager(container), 'betty-pager-next'));
    await click(byTestId(pager(container), 'betty-pager-previous'));
    expect(allByTestId(container, 'betty-job-row')[3].textContent).toContain('approve it in the chat');
  });
});

const HISTORY_COLUMNS: [string, ColumnType][] = [
  ['job_id', 'string'],
  ['name', 'string'],
  ['partition', 'string'],
  ['state', 'string'],
  ['exit_code', 'string'],
  ['ended', 'string']
];

function history(...jobs: [string, string, string, string][]): IOutcome {
  const records = jobs.map(([job_id, state, exit_code, ended]) => ({
    job_id,
    name: job_id === '124' ? '<b>train</b>' : `job ${job_id}`,
    partition: 'gpu',
    state,
    exit_code,
    ended
  }));
  return {
    ok: true,
    summary: `${jobs.length} jobs`,
    artifacts: [],
    data: { kind: 'table', value: tableOf(HISTORY_COLUMNS, records) },
    text: null
  };
}

describe('JobsView: finished jobs', () => {
  const finished = () =>
    history(
      ['120', 'COMPLETED', '0:0', '2024-05-01T09:00:00'],
      ['124', 'FAILED', '1:0', '2024-05-01T11:00:00'],
      ['124.batch', 'FAILED', '1:0', '2024-05-01T11:00:00'],
      ['125', 'CANCELLED by 0', '0:15', '2024-05-01T10:00:00'],
      ['126', 'RUNNING', '0:0', '']
    );

  it('keeps recent finished jobs, newest first, with state and exit code, filterable by state', async () => {
    const p = props({ loadHistory: jest.fn().mockResolvedValue(finished()), onResubmit: jest.fn() });
    const { container } = render(<JobsView {...p} />);
    await settle();
    expect(p.loadHistory).toHaveBeenCalledWith('dev');
    const rows = () => allByTestId(container, 'betty-finished-row');
    expect(rows().map(row => [row.dataset.jobId, row.dataset.state])).toEqual([
      ['124', 'FAILED'],
      ['125', 'CANCELLED'],
      ['120', 'COMPLETED']
    ]);
    expect(rows()[0].textContent).toContain('exit code 1:0');
    expect(rows()[0].textContent).toContain('ended 2024-05-01 11:00');
    expect(rows()[0].textContent).not.toContain('T11:00');
    expect(rows()[0].querySelector('b')).toBeNull(); // a job name is text
    expect(rows()[0].textContent).toContain('<b>train</b>');
    const filter = byTestId<HTMLSelectElement>(container, 'betty-finished-filter');
    expect(Array.from(filter.options).map(option => option.value)).toEqual([
      '',
      'CANCELLED',
      'COMPLETED',
      'FAILED'
    ]);
    choose(filter, 'COMPLETED');
    expect(rows().map(row => row.dataset.jobId)).toEqual(['120']);
  });

  it('offers Resubmit… for a job Betty recorded, and shows why it was refused', async () => {
    const onResubmit = jest.fn().mockRejectedValue(new Error('Betty has no chat session yet.'));
    const p = props({ loadHistory: jest.fn().mockResolvedValue(finished()), onResubmit });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const recorded = allByTestId(container, 'betty-finished-row').filter(
      row => row.querySelector('[data-testid="betty-resubmit"]') !== null
    );
    expect(recorded.map(row => row.dataset.jobId)).toEqual(['124']);
    await click(byTestId(recorded[0], 'betty-resubmit'));
    expect(onResubmit).toHaveBeenCalledWith('124');
    expect(byTestId(container, 'betty-resubmit-error').textContent).toBe(
      'Betty has no chat session yet.'
    );
  });
});

describe('JobsView: many finished jobs', () => {
  it('lists a page of them, pages on, and filters across all of them', async () => {
    const rows: [string, string, string, string][] = Array.from({ length: 100 }, (_, i) => [
      String(500 + i),
      i % 40 === 39 ? 'FAILED' : 'COMPLETED',
      '0:0',
      `2024-05-01T${String(10 + Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:00`
    ]);
    const p = props({ loadHistory: jest.fn().mockResolvedValue(history(...rows)), onResubmit: jest.fn() });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const ids = () => allByTestId(container, 'betty-finished-row').map(row => row.dataset.jobId);
    expect(ids()).toHaveLength(RECENT_FINISHED);
    expect(ids()[0]).toBe('599'); // newest first
    const pager = byTestId(container, 'betty-finished-pager');
    expect(byTestId(pager, 'betty-pager-range').textContent).toBe('rows 1–30 of 100');
    await click(byTestId(pager, 'betty-pager-next'));
    expect(ids()[0]).toBe('569');
    choose(byTestId<HTMLSelectElement>(container, 'betty-finished-filter'), 'FAILED');
    expect(ids()).toEqual(['579', '539']);
    expect(allByTestId(container, 'betty-finished-pager')).toHaveLength(0);
  });
});

function choose(select: HTMLSelectElement, value: string): void {
  act(() => {
    select.value = value;
    select.dispatchEvent(new Event('change', { bubbles: true }));
  });
}
