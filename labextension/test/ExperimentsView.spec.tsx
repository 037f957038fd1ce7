/**
 * The Experiments tab: newest first, and Resubmit… on each recorded job.
 */
import * as React from 'react';

import { ExperimentsView, newestFirst } from '../src/components/ExperimentsView';
import { IExperiment } from '../src/models';
import { allByTestId, byTestId, click, render, settle, useFakeClock } from './render';

function experiment(slug: string, submitted: string, job_id: string): IExperiment {
  return {
    slug,
    job_id,
    cluster: 'dev',
    submitted,
    goal: 'train',
    script: '#!/bin/bash\nhostname',
    script_path: `scripts/${slug}.sbatch`,
    partition: 'cpu',
    resources: {},
    gpu_estimate: null,
    state: 'COMPLETED',
    finished: true,
    page: `wiki/experiments/${slug}.md`,
    notebook: `notebooks/experiments/${slug}.ipynb`
  };
}

const RECORDED = [
  experiment('2024-05-01-zeta', '2024-05-01T09:00:00', '1'),
  experiment('2024-05-02-alpha', '2024-05-02T08:00:00', '2'),
  experiment('2024-05-01-alpha', '2024-05-01T18:00:00', '3')
];

describe('ExperimentsView', () => {
  useFakeClock();

  it('sorts newest first by submission time, not by name', () => {
    expect(newestFirst(RECORDED).map(each => each.job_id)).toEqual(['2', '3', '1']);
  });

  it('lists them newest first, each with Resubmit…', async () => {
    const onResubmit = jest.fn().mockResolvedValue(undefined);
    const { container } = render(
      <ExperimentsView
        visible={true}
        loadExperiments={jest.fn().mockResolvedValue({ experiments: RECORDED })}
        onOpen={jest.fn()}
        onResubmit={onResubmit}
      />
    );
    await settle();
    const rows = allByTestId(container, 'betty-experiment-row');
    expect(rows.map(row => row.dataset.slug)).toEqual([
      '2024-05-02-alpha',
      '2024-05-01-alpha',
      '2024-05-01-zeta'
    ]);
    await click(byTestId(rows[1], 'betty-resubmit'));
    expect(onResubmit).toHaveBeenCalledWith('3');
  });

  it('offers Fetch result on an ended notebook run only, and asks for it by its slug', async () => {
    const run = {
      ...experiment('2024-05-03-train', '2024-05-03T08:00:00', '4'),
      script: '#!/bin/bash\n#SBATCH --chdir=/home/me/betty/runs/notebook-0a1b\npython3 notebook_runner.py'
    };
    const running = { ...run, slug: '2024-05-04-train', job_id: '5', state: 'RUNNING', finished: false };
    const onFetchResult = jest.fn().mockRejectedValueOnce(new Error('no model <b>needed</b>'));
    const { container } = render(
      <ExperimentsView
        visible={true}
        loadExperiments={jest.fn().mockResolvedValue({ experiments: [...RECORDED, run, running] })}
        onOpen={jest.fn()}
        onFetchResult={onFetchResult}
      />
    );
    await settle();
    const buttons = allByTestId(container, 'betty-fetch-result');
    expect(buttons).toHaveLength(1);
    const row = buttons[0].closest('[data-testid="betty-experiment-row"]') as HTMLElement;
    expect(row.dataset.slug).toBe('2024-05-03-train');
    await click(buttons[0]);
    expect(onFetchResult).toHaveBeenCalledWith('2024-05-03-train');
    expect(byTestId(row, 'betty-fetch-result-error').textContent).toBe('no model <b>needed</b>');
  });
});
