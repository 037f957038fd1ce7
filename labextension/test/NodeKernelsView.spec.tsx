/**
 * The Jobs tab's node kernels: nothing while there is none; each running allocation with the time left, counted
 * down between reads; Stop asks first, and only a confirmed click stops it; what came back is one line, as text.
 */
import * as React from 'react';

import { NodeKernelsView, timeLeft } from '../src/components/NodeKernelsView';
import { INodeKernel, INodeKernels, IOutcome } from '../src/models';
import { allByTestId, byTestId, click, render, settle, useFakeClock } from './render';

useFakeClock();

const KERNEL: INodeKernel = {
  kernel: 'a'.repeat(32),
  job_id: '12',
  state: 'RUNNING',
  line: 'job 12 RUNNING on n1 · ends at 21:04 (30 min left)',
  ends: '2026-11-30T21:04:00',
  seconds_left: 30 * 60,
  slug: '2026-11-30-kernel',
  notebook_kernel: null
};

function outcome(summary: string): IOutcome {
  return { ok: true, summary, artifacts: [], data: null, text: null } as IOutcome;
}

test('the time left is the minutes rounded up, from the end the server read', () => {
  expect(timeLeft(KERNEL, 0)).toBe('ends at 21:04 (30 min left)');
  expect(timeLeft(KERNEL, 61)).toBe('ends at 21:04 (29 min left)');
  expect(timeLeft(KERNEL, 4000)).toBe('ends at 21:04 (0 min left)');
  expect(timeLeft({ ...KERNEL, ends: null, seconds_left: null }, 0)).toBe('');
});

test('shows nothing while the person has no node kernel', async () => {
  const load = jest.fn(async (): Promise<INodeKernels> => ({ cluster: 'dev', kernels: [] }));
  const { container } = render(
    <NodeKernelsView cluster="dev" visible refreshSeconds={10} load={load} stop={jest.fn()} />
  );
  await settle();
  expect(load).toHaveBeenCalledWith('dev');
  expect(allByTestId(container, 'betty-node-kernels')).toHaveLength(0);
});

test('lists a running allocation with its time left, counted down between reads', async () => {
  let clock = 1_000_000;
  const load = jest.fn(async (): Promise<INodeKernels> => ({ cluster: 'dev', kernels: [KERNEL] }));
  const { container } = render(
    <NodeKernelsView cluster="dev" visible refreshSeconds={600} load={load} stop={jest.fn()} now={() => clock} />
  );
  await settle();
  const row = byTestId(container, 'betty-node-kernel');
  expect(row.getAttribute('data-job')).toBe('12');
  expect(byTestId(container, 'betty-node-kernel-left').textContent).toBe('ends at 21:04 (30 min left)');
  clock += 5 * 60 * 1000;
  await settle(15_000);
  expect(byTestId(container, 'betty-node-kernel-left').textContent).toBe('ends at 21:04 (25 min left)');
  expect(load).toHaveBeenCalledTimes(1);
});

test('Stop asks first; a refusal stops nothing, a confirmed click stops it and says what happened', async () => {
  let kernels = [KERNEL];
  const load = jest.fn(async (): Promise<INodeKernels> => ({ cluster: 'dev', kernels }));
  const stop = jest.fn(async (kernel: INodeKernel): Promise<IOutcome> => {
    kernels = [];
    return outcome(`cancelled job ${kernel.job_id} on dev: the node kernel is stopped\nmore`);
  });
  const answers = [false, true];
  const confirm = jest.fn(async () => answers.shift() ?? false);
  const { container } = render(
    <NodeKernelsView cluster="dev" visible refreshSeconds={600} load={load} stop={stop} confirm={confirm} />
  );
  await settle();
  await click(byTestId(container, 'betty-node-kernel-stop'));
  expect(confirm).toHaveBeenCalledWith(KERNEL);
  expect(stop).not.toHaveBeenCalled();
  await click(byTestId(container, 'betty-node-kernel-stop'));
  await settle();
  expect(stop).toHaveBeenCalledWith(KERNEL, 'dev');
  expect(allByTestId(container, 'betty-node-kernel')).toHaveLength(0);
  expect(byTestId(container, 'betty-node-kernel-note').textContent).toBe(
    'cancelled job 12 on dev: the node kernel is stopped'
  );
});

test('a job id or state with markup stays text, and a failed read is one line', async () => {
  const load = jest
    .fn()
    .mockResolvedValueOnce({ cluster: 'dev', kernels: [{ ...KERNEL, job_id: '<b>12</b>', ends: null }] })
    .mockRejectedValueOnce(new Error('the cluster did not answer\nTraceback'));
  const { container } = render(
    <NodeKernelsView cluster="dev" visible refreshSeconds={2} load={load} stop={jest.fn()} />
  );
  await settle();
  const row = byTestId(container, 'betty-node-kernel');
  expect(row.querySelector('b')).toBeNull();
  expect(row.textContent).toContain('<b>12</b>');
  expect(byTestId(container, 'betty-node-kernel-left').textContent).toBe(KERNEL.line);
  await settle(2000);
  expect(byTestId(container, 'betty-node-kernels-error').textContent).toBe('the cluster did not answer');
});
