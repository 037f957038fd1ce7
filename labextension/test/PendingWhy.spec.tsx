/**
 * The explanation box of a pending job's "why?": asks once per "why?", shows the lines as text,
 * says it is asking while it waits, one line when it fails, and takes the keyboard focus.
 */
import * as React from 'react';
import { act } from 'react';

import { IWhyFor, WhyBox, whyLines } from '../src/components/PendingWhy';
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

const JOB: IWhyFor = { cluster: 'dev', jobId: '7', name: 'train <i>x</i>', asked: 1 };

/** A load whose answer the test gives when it likes. */
function later(): { load: jest.Mock<Promise<IOutcome>, [string]>; answer: (outcome: IOutcome) => Promise<void> } {
  let resolve: (outcome: IOutcome) => void = () => undefined;
  const load = jest.fn((_jobId: string) => new Promise<IOutcome>(done => (resolve = done)));
  const answer = async (outcome: IOutcome) => {
    await act(async () => resolve(outcome));
  };
  return { load, answer };
}

test('asks the server, says so while it waits, then shows the lines; markup in them stays text', async () => {
  const { load, answer } = later();
  const { container } = render(<WhyBox job={JOB} load={load} onClose={() => undefined} />);
  expect(load).toHaveBeenCalledWith('7');
  const box = byTestId(container, 'betty-job-why');
  expect(box.textContent).toContain('asking Slurm…');
  expect(byTestId(container, 'betty-job-why-title').textContent).toBe('Why job 7 · train <i>x</i> waits');
  expect(box.querySelector('i')).toBeNull();
  await answer(
    explained(['Job 7 is pending in partition gpu because <b>x</b> (Slurm: Resources).', 'Priority 1,562 (sprio).'])
  );
  expect(box.textContent).not.toContain('asking Slurm…');
  const shown = byTestId(container, 'betty-job-why-answer');
  expect(shown.querySelector('.betty-PendingWhy-headline')?.textContent).toContain('because <b>x</b>');
  expect(shown.querySelector('b')).toBeNull();
  expect(Array.from(shown.querySelectorAll('li')).map(li => li.textContent)).toEqual(['Priority 1,562 (sprio).']);
});

test('takes the keyboard focus when it opens, and its close button closes it', async () => {
  const onClose = jest.fn();
  const { container } = render(<WhyBox job={JOB} load={async () => explained(['a'])} onClose={onClose} />);
  await act(async () => undefined);
  const box = byTestId(container, 'betty-job-why');
  expect(document.activeElement).toBe(box);
  expect(box.getAttribute('aria-live')).toBe('polite');
  const close = byTestId<HTMLButtonElement>(container, 'betty-job-why-close');
  expect(close.tagName).toBe('BUTTON');
  await click(close);
  expect(onClose).toHaveBeenCalledTimes(1);
});

test('asks again for another "why?", and not when only the list re-renders', async () => {
  const load = jest.fn(async (jobId: string) => explained([`about ${jobId}`]));
  const { container, rerender } = render(<WhyBox job={JOB} load={load} onClose={() => undefined} />);
  await act(async () => undefined);
  rerender(<WhyBox job={{ ...JOB }} load={jobId => load(jobId)} onClose={() => undefined} />);
  await act(async () => undefined);
  expect(load).toHaveBeenCalledTimes(1);
  rerender(<WhyBox job={{ ...JOB, asked: 2 }} load={load} onClose={() => undefined} />);
  await act(async () => undefined);
  expect(load).toHaveBeenCalledTimes(2);
  rerender(<WhyBox job={{ cluster: 'dev', jobId: '9', name: 'other', asked: 3 }} load={load} onClose={() => undefined} />);
  await act(async () => undefined);
  expect(byTestId(container, 'betty-job-why-answer').textContent).toBe('about 9');
});

test('a failure is one line, control characters written out', async () => {
  const load = async (): Promise<IOutcome> => {
    throw new Error('job 7 is not one of your jobs in the queue\x1b[31m\nsecond line');
  };
  const { container } = render(<WhyBox job={JOB} load={load} onClose={() => undefined} />);
  await act(async () => undefined);
  expect(byTestId(container, 'betty-job-why-error').textContent).toBe(
    'job 7 is not one of your jobs in the queue\\x1b[31m'
  );
});

test('a refused outcome gives its first line; an answer without lines gives the summary', () => {
  expect(whyLines({ ok: false, summary: 'no such job\nmore', artifacts: [], data: null, text: null })).toEqual({
    kind: 'failed',
    message: 'no such job'
  });
  expect(whyLines({ ok: true, summary: 'one\ntwo', artifacts: [], data: null, text: null })).toEqual({
    kind: 'shown',
    lines: ['one', 'two'],
    move: null
  });
});
