/**
 * Sweeps in the Experiments tab: the list, one sweep's comparison as text (hostile cells
 * too), its pictures as images, and the buttons that start the tier-2 cards in the chat.
 */
import * as React from 'react';

import { retryWords, SweepsView } from '../src/components/SweepsView';
import { ISweep, ISweepComparison } from '../src/models';
import { allByTestId, byTestId, click, render, settle, useFakeClock } from './render';

const HOSTILE = '<img src=x onerror=alert(1)>';

const SWEEP: ISweep = {
  experiment: {
    slug: '2026-11-25-lr',
    job_id: '4242',
    cluster: 'dev',
    submitted: '2026-11-25T10:00:00',
    goal: 'which lr',
    script: '#!/bin/bash\nhostname',
    script_path: 'scripts/lr.sbatch',
    partition: null,
    resources: {},
    gpu_estimate: null,
    state: 'FAILED',
    finished: true,
    page: 'wiki/experiments/2026-11-25-lr.md',
    notebook: 'notebooks/experiments/2026-11-25-lr.ipynb'
  },
  grid: ['lr=0.1,0.2', `tag=${HOSTILE},plain`],
  tasks: 4,
  at_once: null,
  retries: 0
};

function comparison(states: string[], failed: number[]): ISweepComparison {
  return {
    ok: true,
    summary: 'sweep 2026-11-25-lr (job array 4242): 4 tasks',
    slug: SWEEP.experiment.slug,
    job_id: '4242',
    cluster: 'dev',
    header: ['task', 'lr', 'tag', 'state', 'runtime', 'efficiency', 'loss', 'notes'],
    rows: states.map((state, index) => [
      `${index} (4242_${index})`,
      index < 2 ? '0.1' : '0.2',
      index % 2 ? 'plain' : HOSTILE,
      state,
      '0:05',
      '',
      `3.${index}5`,
      failed.includes(index) ? 'Failed: <script>alert(3)</script>\x1b[31m' : ''
    ]),
    states,
    failed,
    charts: [
      {
        metric: 'loss',
        parameter: null,
        svg: '<svg xmlns="http://www.w3.org/2000/svg"><title>loss</title></svg>'
      },
      {
        metric: 'loss',
        parameter: 'tag',
        svg: '<svg xmlns="http://www.w3.org/2000/svg"></svg>'
      },
      { metric: 'loss', parameter: 'lr', svg: '<div>not a chart</div>' }
    ],
    search_header: [],
    search_rows: [],
    search_note: ''
  };
}

function view(answer: ISweepComparison, onAction = jest.fn().mockResolvedValue(undefined)) {
  const loadComparison = jest.fn().mockResolvedValue(answer);
  const rendered = render(
    <SweepsView
      visible={true}
      loadSweeps={jest.fn().mockResolvedValue({ sweeps: [SWEEP] })}
      loadComparison={loadComparison}
      onAction={onAction}
    />
  );
  return { ...rendered, loadComparison, onAction };
}

describe('SweepsView', () => {
  useFakeClock();

  it('shows nothing while no sweep is recorded', async () => {
    const { container } = render(
      <SweepsView
        visible={true}
        loadSweeps={jest.fn().mockResolvedValue({ sweeps: [] })}
        loadComparison={jest.fn()}
        onAction={jest.fn()}
      />
    );
    await settle();
    expect(container.querySelector('[data-testid="betty-sweeps"]')).toBeNull();
  });

  it('lists a sweep and opens its comparison: every cell as text, the charts as images', async () => {
    const { container, loadComparison } = view(
      comparison(['COMPLETED', 'COMPLETED', 'COMPLETED', 'FAILED'], [3])
    );
    await settle();
    const row = byTestId(container, 'betty-sweep-row');
    expect(row.dataset.slug).toBe('2026-11-25-lr');
    expect(row.textContent).toContain(`tag=${HOSTILE},plain`);
    await click(byTestId(row, 'betty-sweep-compare'));
    await settle();
    expect(loadComparison).toHaveBeenCalledWith('2026-11-25-lr');
    const tasks = allByTestId(container, 'betty-sweep-task');
    expect(tasks.map(task => task.dataset.state)).toEqual([
      'COMPLETED',
      'COMPLETED',
      'COMPLETED',
      'FAILED'
    ]);
    expect(tasks[0].textContent).toContain(HOSTILE);
    expect(tasks[3].textContent).toContain('<script>alert(3)</script>\\x1b[31m');
    expect(tasks[3].className).toBe('betty-SweepTable-failed');
    expect(container.querySelector('img[onerror], script, table img')).toBeNull();
    // Two SVG charts show as data: images; what is not one SVG element shows nothing.
    const charts = container.querySelectorAll('img.betty-Chart');
    expect(charts).toHaveLength(2);
    expect(charts[0].getAttribute('src')).toMatch(/^data:image\/svg\+xml;charset=utf-8,%3Csvg/);
    expect(charts[1].getAttribute('alt')).toBe('final loss by tag');
    expect(container.querySelector('[data-testid="betty-sweep-search"]')).toBeNull();
  });

  it("shows a search's trials as text, and no search table for a grid", async () => {
    const searched = {
      ...comparison(['COMPLETED', 'CANCELLED'], []),
      search_header: ['task', 'loss', 'best so far', 'state', 'why'],
      search_rows: [
        ['0', '0.25', '0.25', 'complete', ''],
        ['1', '', '0.25', 'pruned', `median rule: ${HOSTILE}`]
      ],
      search_note: 'parameter importance (Optuna): lr 0.9, layers 0.1'
    };
    const { container } = view(searched);
    await settle();
    await click(byTestId(byTestId(container, 'betty-sweep-row'), 'betty-sweep-compare'));
    await settle();
    const trials = allByTestId(container, 'betty-sweep-trial');
    expect(trials.map(trial => trial.textContent)).toEqual([
      '00.250.25complete',
      `10.25prunedmedian rule: ${HOSTILE}`
    ]);
    expect(byTestId(container, 'betty-sweep-search').textContent).toContain('lr 0.9, layers 0.1');
    expect(container.querySelector('img[onerror], script')).toBeNull();
  });

  it("asks for a search's next round in the chat, and offers no resubmission by index", async () => {
    const searched = {
      ...comparison(['COMPLETED', 'FAILED'], [1]),
      search_header: ['task', 'loss', 'best so far', 'state', 'why'],
      search_rows: [['0', '0.25', '0.25', 'complete', '']],
      search_note: ''
    };
    const { container, onAction } = view(searched);
    await settle();
    await click(byTestId(container, 'betty-sweep-compare'));
    await settle();
    expect(container.querySelector('[data-testid="betty-sweep-retry"]')).toBeNull();
    await click(byTestId(container, 'betty-sweep-next-round'));
    expect(onAction).toHaveBeenCalledWith('sweep_round', { experiment: '2026-11-25-lr' });
  });

  it('starts sweep_retry with only the failed tasks, and offers no cancel once every task ended', async () => {
    const { container, onAction } = view(
      comparison(['COMPLETED', 'FAILED', 'COMPLETED', 'FAILED'], [1, 3])
    );
    await settle();
    await click(byTestId(container, 'betty-sweep-compare'));
    await settle();
    const retry = byTestId(container, 'betty-sweep-retry') as HTMLButtonElement;
    expect(retry.textContent).toBe('Resubmit failed tasks 1 and 3');
    await click(retry);
    expect(onAction).toHaveBeenCalledWith('sweep_retry', {
      experiment: '2026-11-25-lr',
      tasks: [1, 3]
    });
    expect((byTestId(container, 'betty-sweep-cancel') as HTMLButtonElement).disabled).toBe(true);
  });

  it('names one failed task by its index, never as a count', () => {
    expect(retryWords([3])).toBe('Resubmit failed task 3');
    expect(retryWords([0, 2, 5])).toBe('Resubmit failed tasks 0, 2 and 5');
    expect(retryWords([])).toBe('Resubmit failed tasks');
  });

  it('starts sweep_cancel while a task runs, and has nothing to resubmit when none failed', async () => {
    const { container, onAction } = view(
      comparison(['RUNNING', 'PENDING', 'COMPLETED', 'COMPLETED'], [])
    );
    await settle();
    await click(byTestId(container, 'betty-sweep-compare'));
    await settle();
    expect((byTestId(container, 'betty-sweep-retry') as HTMLButtonElement).disabled).toBe(true);
    await click(byTestId(container, 'betty-sweep-cancel'));
    expect(onAction).toHaveBeenCalledWith('sweep_cancel', {
      experiment: '2026-11-25-lr'
    });
  });

  it('shows a comparison that could not be read as its one line', async () => {
    const failedRead = {
      ...comparison([], []),
      ok: false,
      summary: 'no sweep \x1b[2J here'
    };
    const { container } = view(failedRead);
    await settle();
    await click(byTestId(container, 'betty-sweep-compare'));
    await settle();
    expect(byTestId(container, 'betty-sweep-error').textContent).toBe('no sweep \\x1b[2J here');
    expect(container.querySelector('[data-testid="betty-sweep-table"]')).toBeNull();
  });
});
