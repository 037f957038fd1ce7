/**
 * A pending row's "why?": asks once per opening, shows the explanation's lines as text, and one line when it fails.
 */
import * as React from 'react';

import { pendingWhy, PendingWhy } from '../src/components/PendingWhy';
import { IOutcome } from '../src/models';
import { byTestId, click, render } from './render';

function explained(lines: string[]): IOutcome {
  return {
    ok: true,
    summary: lines.join('\n'),
    artifacts: [],
    data: { kind: 'json', value: { reason: 'Resources', lines } },
    text: null
  };
}

test('opening asks the server and shows the lines; markup in them stays text', async () => {
  const load = jest.fn(async () =>
    explained(['Job 7 is pending in partition gpu because <b>x</b> (Slurm: Resources).', 'Priority 1,562 (sprio).'])
  );
  const { container } = render(<PendingWhy jobId="7" load={load} />);
  const toggle = byTestId(container, 'betty-job-why-toggle');
  expect(toggle.textContent).toBe('why?');
  await click(toggle);
  expect(load).toHaveBeenCalledTimes(1);
  const answer = byTestId(container, 'betty-job-why-answer');
  expect(answer.querySelector('.betty-PendingWhy-headline')?.textContent).toContain('because <b>x</b>');
  expect(answer.querySelector('b')).toBeNull();
  expect(Array.from(answer.querySelectorAll('li')).map(li => li.textContent)).toEqual(['Priority 1,562 (sprio).']);
  await click(byTestId(container, 'betty-job-why-toggle'));
  expect(container.querySelector('[data-testid="betty-job-why-answer"]')).toBeNull();
  await click(byTestId(container, 'betty-job-why-toggle'));
  expect(load).toHaveBeenCalledTimes(2);
});

test('a refusal is one line, control characters written out', async () => {
  const load = async (): Promise<IOutcome> => {
    throw new Error('job 7 is not one of your jobs in the queue\x1b[31m');
  };
  const { container } = render(<PendingWhy jobId="7" load={load} />);
  await click(byTestId(container, 'betty-job-why-toggle'));
  expect(byTestId(container, 'betty-job-why-error').textContent).toBe(
    'job 7 is not one of your jobs in the queue\\x1b[31m'
  );
});

test('only a pending job of a known cluster gets a why', () => {
  const load = async () => explained([]);
  expect(pendingWhy('7', 'RUNNING', 'dev', load)).toBeNull();
  expect(pendingWhy('7', 'PENDING', null, load)).toBeNull();
  expect(pendingWhy('7', 'PENDING', 'dev', undefined)).toBeNull();
  expect(pendingWhy('7', 'PENDING', 'dev', load)).not.toBeNull();
});
