/**
 * The Jobs tab: refresh while visible, cancel through the chat, open an experiment's files.
 */
import * as React from 'react';
import { act } from 'react';

import { IJobsViewProps, JOB_ROW_HEIGHT, JobsView } from '../src/components/JobsView';
import { FINISHED_ROW_HEIGHT } from '../src/components/FinishedJobs';
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

  it('offers extend on a running job of a chain Betty recorded, any of its segments, through the chat', async () => {
    const chain: IExperiments = {
      experiments: [{ ...EXPERIMENTS.experiments[0], job_id: '130', segments: ['130', '131', '132'] }]
    };
    const onExtend = jest.fn().mockResolvedValue(undefined);
    const p = props({
      loadJobs: jest.fn().mockResolvedValue(queue(['131', 'RUNNING'], ['140', 'RUNNING'])),
      loadExperiments: jest.fn().mockResolvedValue(chain),
      onExtend
    });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const [segment, other] = allByTestId(container, 'betty-job-row');
    expect(allByTestId(other, 'betty-job-extend')).toHaveLength(0); // not recorded: nothing to continue
    await click(byTestId(segment, 'betty-job-open-page'));
    expect(p.onOpen).toHaveBeenCalledWith('wiki/experiments/2024-05-01-train.md');
    await click(byTestId(segment, 'betty-job-extend'));
    expect(onExtend).toHaveBeenCalledWith('131');
    expect(segment.textContent).toContain('approve it in the chat');
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

describe('JobsView: 20,000 jobs in one list', () => {
  const HOSTILE = '<img src=x onerror="alert(1)"><b>sweep</b>';

  // 20,000 rows: job 1000 + i, every 1000th running, row `hostile` with a hostile name, and
  // the last row a pending array of 1000 tasks.
  function bigQueue(size = 20_000, hostile = 150): IOutcome {
    const array = (i: number) => i === size - 1;
    const records = Array.from({ length: size }, (_, i) => ({
      job_id: array(i) ? '8_[0-999%10]' : String(1000 + i),
      array_job_id: array(i) ? '8' : String(1000 + i),
      name: i === hostile ? HOSTILE : `job ${1000 + i}`,
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

  async function shown(size = 20_000, hostile = 150): Promise<HTMLElement> {
    const p = props({ loadJobs: jest.fn().mockResolvedValue(bigQueue(size, hostile)) });
    const { container } = render(<JobsView {...p} />);
    await settle();
    return container;
  }

  const ids = (container: HTMLElement) =>
    allByTestId(container, 'betty-job-row').map(row => row.dataset.jobId);
  const list = (container: HTMLElement) => byTestId(container, 'betty-jobs-list');

  // jsdom lays nothing out: the list is given the height a panel would give it, and its rows
  // the height they have in the panel's stylesheet.
  const VIEW = 600;
  function laidOut(container: HTMLElement): HTMLElement {
    const scroller = list(container);
    Object.defineProperty(scroller, 'clientHeight', { configurable: true, value: VIEW });
    return scroller;
  }

  function scrollTo(scroller: HTMLElement, top: number): void {
    act(() => {
      scroller.scrollTop = top;
      scroller.dispatchEvent(new Event('scroll'));
    });
  }

  /** Scroll so that the job at `index` (from 0) is in view. */
  const scrollToRow = (scroller: HTMLElement, index: number) => scrollTo(scroller, index * JOB_ROW_HEIGHT);

  it('puts only the rows in view (and a few more) in the page, with room for the rest', async () => {
    const container = await shown();
    const scroller = laidOut(container);
    scrollTo(scroller, 0);
    const inView = Math.ceil(VIEW / JOB_ROW_HEIGHT);
    expect(ids(container).length).toBeGreaterThanOrEqual(inView);
    expect(ids(container).length).toBeLessThanOrEqual(inView + 2 * 8);
    expect(ids(container)[0]).toBe('1000');
    // the room below the rows stands for every job left out, so the scrollbar spans them all
    const rooms = container.querySelectorAll<HTMLElement>('.betty-RowWindow-room');
    expect(rooms).toHaveLength(1);
    expect(rooms[0].style.height).toBe(`${(20_000 - ids(container).length) * JOB_ROW_HEIGHT}px`);
    expect(rooms[0].getAttribute('aria-hidden')).toBe('true');
  });

  it('scrolls to the last job, and back to the first', async () => {
    const container = await shown();
    const scroller = laidOut(container);
    scrollTo(scroller, 20_000 * JOB_ROW_HEIGHT - VIEW);
    const last = ids(container);
    expect(last[last.length - 1]).toBe('8_[0-999%10]');
    expect(last.length).toBeLessThanOrEqual(Math.ceil(VIEW / JOB_ROW_HEIGHT) + 2 * 8);
    const rooms = container.querySelectorAll<HTMLElement>('.betty-RowWindow-room');
    expect(rooms).toHaveLength(1);
    expect(rooms[0].style.height).toBe(`${(20_000 - last.length) * JOB_ROW_HEIGHT}px`);
    scrollToRow(scroller, 10_000);
    expect(ids(container)).toContain('11000');
    scrollTo(scroller, 0);
    expect(ids(container)[0]).toBe('1000');
  });

  it('tells a screen reader how long the table is and where each row lies in it', async () => {
    const container = await shown();
    const scroller = laidOut(container);
    scrollToRow(scroller, 5000);
    const table = scroller.querySelector('table')!;
    expect(table.getAttribute('aria-rowcount')).toBe('20001'); // the column names are row 1
    const row = allByTestId(container, 'betty-job-row').find(each => each.dataset.jobId === '6000')!;
    expect(row.getAttribute('aria-rowindex')).toBe('5002');
    expect(scroller.getAttribute('role')).toBe('region');
    expect(scroller.getAttribute('aria-label')).toBe('Your jobs in the queue');
  });

  it('counts each task of a pending array in the summary', async () => {
    const container = await shown();
    const summary = byTestId(container, 'betty-jobs-summary');
    expect(summary.dataset.jobs).toBe('20999');
    expect(summary.textContent).toBe('20,999 jobs: 20,980 PENDING, 19 RUNNING');
  });

  it('filters by state across every row, back at the top of the list', async () => {
    const container = await shown();
    const scroller = laidOut(container);
    scrollToRow(scroller, 12_000);
    choose(byTestId<HTMLSelectElement>(container, 'betty-jobs-filter'), 'RUNNING');
    expect(ids(container)).toEqual(Array.from({ length: 19 }, (_, k) => String(1999 + 1000 * k)));
    expect(list(container).scrollTop).toBe(0);
    expect(container.querySelector('table')!.getAttribute('aria-rowcount')).toBe('20');
    choose(byTestId<HTMLSelectElement>(container, 'betty-jobs-filter'), '');
    expect(ids(container)[0]).toBe('1000');
    expect(byTestId(container, 'betty-jobs-summary').dataset.jobs).toBe('20999');
  });

  it('keeps within the list when it shrinks under the view', async () => {
    const loadJobs = jest.fn().mockResolvedValue(bigQueue(20_000));
    const { container } = render(<JobsView {...props({ loadJobs })} />);
    await settle();
    const scroller = laidOut(container);
    scrollToRow(scroller, 19_000);
    loadJobs.mockResolvedValue(bigQueue(120));
    // the browser pulls the scroll back within the shorter list
    scroller.scrollTop = 120 * JOB_ROW_HEIGHT - VIEW;
    await click(byTestId(container, 'betty-jobs-refresh'));
    expect(ids(container).slice(-2)).toEqual(['1118', '8_[0-999%10]']);
  });

  it('shows a hostile job name far down the list as text', async () => {
    const container = await shown(20_000, 15_150);
    const scroller = laidOut(container);
    scrollToRow(scroller, 15_150);
    const row = allByTestId(container, 'betty-job-row').find(each => each.dataset.jobId === '16150')!;
    expect(row.textContent).toContain(HOSTILE);
    expect(row.querySelector('img, b')).toBeNull();
  });

  it('cancels an own job far down the list through the chat, and keeps what became of it', async () => {
    const p = props({ loadJobs: jest.fn().mockResolvedValue(bigQueue()) });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const scroller = laidOut(container);
    scrollToRow(scroller, 18_500);
    const row = () => allByTestId(container, 'betty-job-row').find(each => each.dataset.jobId === '19500')!;
    await click(byTestId(row(), 'betty-job-cancel'));
    expect(p.onCancel).toHaveBeenCalledWith('19500');
    expect(row().textContent).toContain('approve it in the chat');
    scrollTo(scroller, 0);
    expect(ids(container)).not.toContain('19500');
    scrollToRow(scroller, 18_500);
    expect(row().textContent).toContain('approve it in the chat');
  });

  it("opens a pending job's why far down the list in one box above it, which stays as the list scrolls", async () => {
    const explanation = ['Job 19990 waits because <img src=x onerror="alert(2)"> (Slurm: Resources).', '<b>ahead</b>: 3'];
    const loadWhy = jest.fn().mockResolvedValue({
      ok: true,
      summary: explanation.join('\n'),
      artifacts: [],
      data: { kind: 'json', value: { lines: explanation } },
      text: null
    } as IOutcome);
    const p = props({ loadJobs: jest.fn().mockResolvedValue(bigQueue(20_000, 18_990)), loadWhy });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const scroller = laidOut(container);
    scrollToRow(scroller, 18_985);
    const row = () => allByTestId(container, 'betty-job-row').find(each => each.dataset.jobId === '19990')!;
    const rooms = () => Array.from(container.querySelectorAll<HTMLElement>('.betty-RowWindow-room'));
    const roomFor = () => rooms().reduce((sum, room) => sum + parseFloat(room.style.height), 0);
    const before = roomFor();
    const running = allByTestId(container, 'betty-job-row').find(each => each.dataset.state === 'RUNNING')!;
    expect(running.querySelector('[data-testid="betty-job-why-toggle"]')).toBeNull();
    await click(byTestId(row(), 'betty-job-why-toggle'));
    expect(loadWhy).toHaveBeenCalledWith('dev', '19990');
    expect(byTestId(row(), 'betty-job-why-toggle').getAttribute('aria-expanded')).toBe('true');
    const box = byTestId(container, 'betty-job-why');
    // outside the scrolling list, above it; the rows hold no explanation and keep their room
    expect(scroller.contains(box)).toBe(false);
    expect(box.compareDocumentPosition(scroller) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(row().querySelector('[data-testid="betty-job-why"]')).toBeNull();
    expect(roomFor()).toBe(before);
    expect(document.activeElement).toBe(box);
    expect(byTestId(container, 'betty-job-why-title').textContent).toBe(`Why job 19990 · ${HOSTILE} waits`);
    expect(byTestId(container, 'betty-job-why-answer').textContent).toContain('<img src=x onerror="alert(2)">');
    expect(box.querySelector('img, b')).toBeNull();
    scrollTo(scroller, 0);
    expect(ids(container)).not.toContain('19990');
    expect(byTestId(container, 'betty-job-why').dataset.jobId).toBe('19990');
    expect(loadWhy).toHaveBeenCalledTimes(1);
    // another row's why? replaces it; close takes it away
    await click(byTestId(allByTestId(container, 'betty-job-row')[1], 'betty-job-why-toggle'));
    expect(byTestId(container, 'betty-job-why').dataset.jobId).toBe('1001');
    scrollToRow(scroller, 18_985);
    expect(byTestId(row(), 'betty-job-why-toggle').getAttribute('aria-expanded')).toBe('false');
    expect(loadWhy).toHaveBeenLastCalledWith('dev', '1001');
    await click(byTestId(container, 'betty-job-why-close'));
    expect(container.querySelector('[data-testid="betty-job-why"]')).toBeNull();
  });

  it("says when a pending job's why fails, in one line, and leaves it with its cluster", async () => {
    const loadWhy = jest.fn().mockRejectedValue(new Error('Slurm did not answer\nsecond line'));
    const { container, rerender } = render(<JobsView {...props({ loadWhy })} />);
    await settle();
    const pending = allByTestId(container, 'betty-job-row').find(each => each.dataset.state === 'PENDING')!;
    await click(byTestId(pending, 'betty-job-why-toggle'));
    expect(byTestId(container, 'betty-job-why-error').textContent).toBe('Slurm did not answer');
    // another cluster's tab has no box about this cluster's job
    rerender(<JobsView {...props({ loadWhy, cluster: 'big' })} />);
    await settle();
    expect(container.querySelector('[data-testid="betty-job-why"]')).toBeNull();
  });

  it('is where the person left it when they come back to the tab', async () => {
    const p = props({ loadJobs: jest.fn().mockResolvedValue(bigQueue()) });
    const { container, rerender } = render(<JobsView {...p} />);
    await settle();
    const scroller = list(container);
    let height = VIEW;
    Object.defineProperty(scroller, 'clientHeight', { configurable: true, get: () => height });
    scrollToRow(scroller, 18_500);
    expect(ids(container)).toContain('19500');
    // the tab hidden (the person approving in the chat): no height, and the browser forgets the scroll
    height = 0;
    rerender(<JobsView {...p} visible={false} />);
    scroller.scrollTop = 0;
    height = VIEW;
    rerender(<JobsView {...p} visible={true} />);
    await settle();
    expect(scroller.scrollTop).toBe(18_500 * JOB_ROW_HEIGHT);
    expect(ids(container)).toContain('19500');
  });

  it('hands keyboard focus to the list when the focused row scrolls out of the page', async () => {
    const container = await shown();
    const scroller = laidOut(container);
    const button = byTestId<HTMLButtonElement>(allByTestId(container, 'betty-job-row')[2], 'betty-job-cancel');
    act(() => button.focus());
    expect(document.activeElement).toBe(button);
    scrollToRow(scroller, 5000);
    expect(button.isConnected).toBe(false);
    expect(document.activeElement).toBe(scroller);
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
  it('scrolls through all of them with only those in view in the page, and filters across all', async () => {
    const size = 5000;
    const minute = (i: number) =>
      `2024-05-01T${String(Math.floor(i / 60) % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:00`;
    const rows: [string, string, string, string][] = Array.from({ length: size }, (_, i) => [
      String(10_000 + i),
      i % 400 === 399 ? 'FAILED' : 'COMPLETED',
      '0:0',
      // a day a job, each a minute later than the one before
      `2024-${String(1 + Math.floor(i / 1440 / 28)).padStart(2, '0')}-${String(1 + (Math.floor(i / 1440) % 28)).padStart(2, '0')}${minute(i).slice(10)}`
    ]);
    const p = props({ loadHistory: jest.fn().mockResolvedValue(history(...rows)), onResubmit: jest.fn() });
    const { container } = render(<JobsView {...p} />);
    await settle();
    const ids = () => allByTestId(container, 'betty-finished-row').map(row => row.dataset.jobId);
    const scroller = byTestId(container, 'betty-finished-list');
    Object.defineProperty(scroller, 'clientHeight', { configurable: true, value: 300 });
    const inPage = Math.ceil(300 / FINISHED_ROW_HEIGHT) + 2 * 8;
    act(() => {
      scroller.dispatchEvent(new Event('scroll'));
    });
    expect(ids()[0]).toBe('14999'); // newest first
    expect(ids().length).toBeLessThanOrEqual(inPage);
    const first = allByTestId(container, 'betty-finished-row')[0];
    expect([first.getAttribute('aria-posinset'), first.getAttribute('aria-setsize')]).toEqual(['1', '5000']);
    act(() => {
      scroller.scrollTop = size * FINISHED_ROW_HEIGHT - 300;
      scroller.dispatchEvent(new Event('scroll'));
    });
    expect(ids()[ids().length - 1]).toBe('10000'); // the oldest, at the end
    expect(ids().length).toBeLessThanOrEqual(inPage);
    choose(byTestId<HTMLSelectElement>(container, 'betty-finished-filter'), 'FAILED');
    expect(ids()).toEqual(Array.from({ length: 12 }, (_, k) => String(14_799 - 400 * k)));
    expect(scroller.scrollTop).toBe(0);
  });
});

function choose(select: HTMLSelectElement, value: string): void {
  act(() => {
    select.value = value;
    select.dispatchEvent(new Event('change', { bubbles: true }));
  });
}
