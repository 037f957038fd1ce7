/**
 * The Finished recently rows show what each job used of what it asked for, from one efficiency read per page.
 */
import * as React from 'react';
import { act } from 'react';

import { IJobsViewProps, JobsView } from '../src/components/JobsView';
import { EFFICIENCY_ASKS, jobEfficiencies, LOW_USE } from '../src/components/EfficiencyBadge';
import { ColumnType, IOutcome } from '../src/models';
import { allByTestId, render } from './render';
import { QUEUE_COLUMNS, tableOf } from './tables';

const HISTORY_COLUMNS: [string, ColumnType][] = [
  ['job_id', 'string'],
  ['name', 'string'],
  ['partition', 'string'],
  ['state', 'string'],
  ['exit_code', 'string'],
  ['ended', 'string']
];

function table(columns: [string, ColumnType][], records: Record<string, unknown>[]): IOutcome {
  return {
    ok: true,
    summary: `${records.length} rows`,
    artifacts: [],
    data: { kind: 'table', value: tableOf(columns, records) },
    text: null
  };
}

const FINISHED = table(
  HISTORY_COLUMNS,
  ['120', '121', '122'].map((job_id, i) => ({
    job_id,
    name: `<img src=x onerror=alert(${i})>`,
    partition: 'cpu',
    state: 'COMPLETED',
    exit_code: '0:0',
    ended: `2024-05-01T10:0${i}:00`
  }))
);

function figures(...jobs: Record<string, unknown>[]): IOutcome {
  return { ok: true, summary: 'efficiency', artifacts: [], data: { kind: 'json', value: { jobs } }, text: null };
}

const GIB = 2 ** 30;
const EFFICIENCY = figures(
  {
    job_id: '122',
    cpu_efficiency: 0.98,
    memory_efficiency: 0.1,
    time_efficiency: 0.5,
    cpu_seconds: 58.8,
    elapsed_seconds: 60,
    cpus: 1,
    memory_peak_bytes: 0.4 * GIB,
    memory_requested_bytes: 4 * GIB,
    time_limit_seconds: 120,
    gpus: 1,
    gpu_utilization: null
  },
  { job_id: '121', cpu_efficiency: null, memory_efficiency: null, time_efficiency: null },
  { job_id: '999', cpu_efficiency: 0.5, memory_efficiency: 0.5, time_efficiency: 0.5 }
);

function props(overrides: Partial<IJobsViewProps>): IJobsViewProps {
  return {
    cluster: 'dev',
    visible: true,
    refreshSeconds: 15,
    loadJobs: jest.fn().mockResolvedValue(table(QUEUE_COLUMNS, [])),
    loadExperiments: jest.fn().mockResolvedValue({ experiments: [] }),
    onCancel: jest.fn(),
    onOpen: jest.fn(),
    loadHistory: jest.fn().mockResolvedValue(FINISHED),
    onResubmit: jest.fn(),
    ...overrides
  };
}

async function settle(): Promise<void> {
  await act(async () => {
    await jest.advanceTimersByTimeAsync(0);
  });
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('EfficiencyBadge on finished jobs', () => {
  it('asks once for the page and shows CPU, memory and time, a low share marked', async () => {
    const loadEfficiency = jest.fn().mockResolvedValue(EFFICIENCY);
    const { container } = render(<JobsView {...props({ loadEfficiency })} />);
    await settle();
    await settle();
    expect(loadEfficiency).toHaveBeenCalledTimes(1);
    expect(loadEfficiency).toHaveBeenCalledWith('dev', ['122', '121', '120']);
    const rows = allByTestId(container, 'betty-finished-row');
    const badge = rows[0].querySelector<HTMLElement>('[data-testid="betty-efficiency"]');
    expect(badge?.textContent).toBe('CPU 98% · mem 10% · time 50%');
    expect(badge?.title).toContain('memory: peak 410 MiB of 4.0 GiB asked');
    expect(badge?.title).toContain('GPUs: 1, use not gathered here');
    const low = Array.from(badge?.querySelectorAll('.betty-Efficiency-low') ?? []).map(each => each.textContent);
    expect(low).toEqual(['mem 10%']);
    // no figure known: no badge, rather than a row of blanks; the names stay text
    expect(rows[1].querySelector('[data-testid="betty-efficiency"]')).toBeNull();
    expect(rows[2].querySelector('[data-testid="betty-efficiency"]')).toBeNull();
    expect(container.querySelector('img')).toBeNull();
  });

  it('asks again on refresh only for jobs whose figures are not complete, a few times at most', async () => {
    const loadEfficiency = jest.fn().mockResolvedValue(EFFICIENCY);
    render(<JobsView {...props({ loadEfficiency })} />);
    await settle();
    for (let refresh = 0; refresh < EFFICIENCY_ASKS + 2; refresh++) {
      await act(async () => {
        await jest.advanceTimersByTimeAsync(15_000);
      });
    }
    const calls = loadEfficiency.mock.calls.map(([, ids]) => ids);
    expect(calls[0]).toEqual(['122', '121', '120']);
    expect(calls.slice(1)).toEqual(Array(EFFICIENCY_ASKS - 1).fill(['121', '120']));
  });

  it('leaves the rows as they are when the figures cannot be read', async () => {
    const loadEfficiency = jest.fn().mockRejectedValue(new Error('accounting is off'));
    const { container } = render(<JobsView {...props({ loadEfficiency })} />);
    await settle();
    await settle();
    expect(allByTestId(container, 'betty-finished-row')).toHaveLength(3);
    expect(allByTestId(container, 'betty-efficiency')).toHaveLength(0);
  });

  it('reads only numbers from the outcome', () => {
    const found = jobEfficiencies(
      figures({ job_id: '7', cpu_efficiency: '0.5', memory_efficiency: NaN, time_efficiency: LOW_USE })
    );
    expect(found['7']).toMatchObject({ cpu: null, memory: null, time: LOW_USE });
    expect(jobEfficiencies({ ...EFFICIENCY, ok: false })).toEqual({});
  });
});
