/**
 * Tables from tool outcomes, as the server writes them: `{columns: [{name, type}], rows: [[…]]}`.
 */
import { IJobRow, jobRows, jobsByState, tableRows } from '../src/table';
import { IOutcome, ITable } from '../src/models';
import { experimentNotebook, experimentPage, IExperiment } from '../src/models';
import { QUEUE_COLUMNS, tableOf } from './tables';

// `cluster_queue`'s table as betty_jupyter.agent.wire writes it (durations in seconds).
const QUEUE = tableOf(QUEUE_COLUMNS, [
  {
    job_id: '123',
    array_job_id: '123',
    name: 'train run',
    user: 'alice',
    partition: 'gpu',
    state: 'RUNNING',
    reason: '',
    elapsed: 3723,
    time_limit: 86400,
    gpus: 1,
    gpu_type: 'a100'
  },
  {
    job_id: '124_3',
    array_job_id: '124',
    name: 'sweep',
    partition: 'cpu',
    state: 'PENDING',
    reason: 'Priority',
    elapsed: 0,
    time_limit: null,
    gpus: 0,
    gpu_type: ''
  },
  {
    job_id: '8_[0-999%10]',
    array_job_id: '8',
    name: 'sweep',
    partition: 'cpu',
    state: 'PENDING',
    reason: 'JobArrayTaskLimit',
    elapsed: 0,
    time_limit: 600,
    gpus: 0,
    gpu_type: '',
    tasks: 1000
  }
]);

function outcome(data: IOutcome['data'], ok = true): IOutcome {
  return { ok, summary: '2 jobs', artifacts: [], data, text: null };
}

describe('tables', () => {
  it('reads the rows of a table by column name', () => {
    expect(tableRows(QUEUE).map(row => row.job_id)).toEqual(['123', '124_3', '8_[0-999%10]']);
    expect(tableRows(QUEUE)[1]).toMatchObject({ user: null, time_limit: null, gpus: 0 });
  });

  it.each([
    [{ columns: [], rows: [] }],
    [{ columns: 'x', rows: [[1]] }],
    [{ columns: [{ name: 'a', type: 'string' }], rows: 'rows' }],
    [null]
  ])('%j has no named rows', table => {
    expect(tableRows(table as unknown as ITable).filter(row => Object.keys(row).length)).toEqual([]);
  });

  it('leaves out a row that is not a list', () => {
    const table = { columns: [{ name: 'a', type: 'string' }], rows: [['x'], 'y', null] };
    expect(tableRows(table as unknown as ITable)).toEqual([{ a: 'x' }]);
  });

  it('turns the queue into job rows', () => {
    expect(jobRows(outcome({ kind: 'table', value: QUEUE }))).toEqual([
      {
        jobId: '123',
        arrayJobId: '123',
        name: 'train run',
        partition: 'gpu',
        state: 'RUNNING',
        reason: '',
        elapsed: '1:02:03',
        timeLimit: '1-00:00:00',
        gpus: '1 × a100',
        tasks: 1
      },
      {
        jobId: '124_3',
        arrayJobId: '124',
        name: 'sweep',
        partition: 'cpu',
        state: 'PENDING',
        reason: 'Priority',
        elapsed: '0:00:00',
        timeLimit: 'INFINITE',
        gpus: '',
        tasks: 1
      },
      {
        jobId: '8_[0-999%10]',
        arrayJobId: '8',
        name: 'sweep',
        partition: 'cpu',
        state: 'PENDING',
        reason: 'JobArrayTaskLimit',
        elapsed: '0:00:00',
        timeLimit: '0:10:00',
        gpus: '',
        tasks: 1000
      }
    ]);
  });

  it('counts each task of a pending array, per state, most first', () => {
    const jobs = jobRows(outcome({ kind: 'table', value: QUEUE }));
    expect(jobsByState(jobs)).toEqual([
      ['PENDING', 1001],
      ['RUNNING', 1]
    ]);
  });

  it.each([[null], [0], [-3], [2.5], ['many']])('a row whose tasks is %j is one job', tasks => {
    const table = tableOf(
      [
        ['job_id', 'string'],
        ['state', 'string'],
        ['tasks', 'integer']
      ],
      [{ job_id: '9', state: 'PENDING', tasks }]
    );
    const [job] = jobRows(outcome({ kind: 'table', value: table }));
    expect((job as IJobRow).tasks).toBe(1);
  });

  it('an outcome that is not a table has no job rows', () => {
    expect(jobRows(outcome(null))).toEqual([]);
    expect(jobRows(outcome({ kind: 'json', value: { rows: [] } }))).toEqual([]);
  });
});

describe('experiment paths', () => {
  const experiment = { slug: '2024-05-01-train', job_id: '1', cluster: 'dev' } as IExperiment;

  it('derives the notebook and page from the slug', () => {
    expect(experimentNotebook(experiment)).toBe('notebooks/experiments/2024-05-01-train.ipynb');
    expect(experimentPage(experiment)).toBe('wiki/experiments/2024-05-01-train.md');
  });

  it('uses the paths the server names, under wiki/ for a page', () => {
    const named = { ...experiment, notebook: 'nb/x.ipynb', page: 'experiments/x.md' };
    expect(experimentNotebook(named)).toBe('nb/x.ipynb');
    expect(experimentPage(named)).toBe('wiki/experiments/x.md');
    expect(experimentPage({ ...experiment, page: 'wiki/experiments/y.md' })).toBe(
      'wiki/experiments/y.md'
    );
  });
});
