/**
 * Tables from tool outcomes: pandas' orient="table" JSON as the server writes it.
 */
import { formatDuration, frameRows, jobRows } from '../src/frame';
import { IOutcome } from '../src/models';
import { experimentNotebook, experimentPage, IExperiment } from '../src/models';

// `cluster_queue`'s frame as betty_jupyter.agent.wire writes it (pandas to_json, orient="table").
const QUEUE = JSON.stringify({
  schema: {
    fields: [
      { name: 'job_id', type: 'string' },
      { name: 'state', type: 'any', constraints: { enum: ['PENDING', 'RUNNING'] } },
      { name: 'elapsed', type: 'duration' }
    ],
    pandas_version: '1.4.0'
  },
  data: [
    {
      job_id: '123',
      array_job_id: '123',
      array_task_id: '',
      name: 'train run',
      user: 'alice',
      partition: 'gpu',
      state: 'RUNNING',
      reason: '',
      elapsed: 'P0DT1H2M3S',
      time_limit: 'P1DT0H0M0S',
      gpus: 1,
      gpu_type: 'a100'
    },
    {
      job_id: '124_3',
      array_job_id: '124',
      array_task_id: '3',
      name: 'sweep',
      partition: 'cpu',
      state: 'PENDING',
      reason: 'Priority',
      elapsed: 'P0DT0H0M0S',
      time_limit: null,
      gpus: 0,
      gpu_type: ''
    }
  ]
});

function outcome(data: IOutcome['data'], ok = true): IOutcome {
  return { ok, summary: '2 jobs', artifacts: [], data };
}

describe('frames', () => {
  it('reads the rows of a pandas table', () => {
    expect(frameRows(QUEUE).map(row => row.job_id)).toEqual(['123', '124_3']);
  });

  it.each([['not json'], ['{"schema": {}}'], ['null'], ['[1, 2]'], ['{"data": "rows"}']])(
    '%s has no rows',
    text => {
      expect(frameRows(text)).toEqual([]);
    }
  );

  it('turns the queue into job rows', () => {
    expect(jobRows(outcome({ kind: 'frame', value: QUEUE }))).toEqual([
      {
        jobId: '123',
        arrayJobId: '123',
        name: 'train run',
        partition: 'gpu',
        state: 'RUNNING',
        reason: '',
        elapsed: '1:02:03',
        timeLimit: '1-00:00:00',
        gpus: '1 × a100'
      },
      {
        jobId: '124_3',
        arrayJobId: '124',
        name: 'sweep',
        partition: 'cpu',
        state: 'PENDING',
        reason: 'Priority',
        elapsed: '0:00:00',
        timeLimit: '',
        gpus: ''
      }
    ]);
  });

  it('an outcome that is not a frame has no job rows', () => {
    expect(jobRows(outcome(null))).toEqual([]);
    expect(jobRows(outcome({ kind: 'json', value: { rows: [] } }))).toEqual([]);
  });

  it.each([
    ['P0DT0H5M0S', '0:05:00'],
    ['P0DT12H0M30.5S', '12:00:30'],
    ['P2DT3H4M5S', '2-03:04:05'],
    ['P1D', '1-00:00:00'],
    [300, '0:05:00'],
    [93784.9, '1-02:03:04'],
    [0, '0:00:00'],
    [null, ''],
    ['UNLIMITED', 'UNLIMITED']
  ])('formatDuration(%s) is %s', (value, text) => {
    expect(formatDuration(value)).toBe(text);
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
