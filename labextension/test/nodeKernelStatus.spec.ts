/**
 * The status bar's node kernel: shown only for the notebook in front whose kernel started a running allocation,
 * the minutes left counted down between reads, the job id as text; nothing at all when the read fails.
 */
import { StatusBar } from '@jupyterlab/statusbar';
import { Signal } from '@lumino/signaling';

import { INodeKernel, INodeKernels } from '../src/models';
import { kernelOf, NodeKernelStatus, statusOf } from '../src/nodeKernelStatus';

const NOTEBOOK = '0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9';
const KERNEL: INodeKernel = {
  kernel: 'a'.repeat(32),
  job_id: '12',
  state: 'RUNNING',
  line: 'job 12 RUNNING on n1 · ends at 21:04 (30 min left)',
  ends: '2026-11-30T21:04:00',
  seconds_left: 30 * 60,
  slug: 'k',
  notebook_kernel: NOTEBOOK
};

test('the notebook in front is known by its kernel id; another tab has none', () => {
  expect(kernelOf({ sessionContext: { session: { kernel: { id: NOTEBOOK } } } })).toBe(NOTEBOOK);
  expect(kernelOf({ sessionContext: { session: null } })).toBeNull();
  expect(kernelOf(null)).toBeNull();
});

test('only the node kernel the notebook in front started shows, its minutes left counted down', () => {
  expect(statusOf([KERNEL], NOTEBOOK, 0)).toEqual({
    text: 'node kernel: 30 min left',
    title: 'node kernel job 12 ends at 21:04'
  });
  expect(statusOf([KERNEL], NOTEBOOK, 90).text).toBe('node kernel: 29 min left');
  expect(statusOf([KERNEL], 'another', 0).text).toBe('');
  expect(statusOf([KERNEL], null, 0).text).toBe('');
  const pending = { ...KERNEL, state: 'PENDING', ends: null, seconds_left: null, job_id: '<b>1</b>' };
  expect(statusOf([pending], NOTEBOOK, 0)).toEqual({ text: 'node kernel: PENDING', title: 'node kernel job <b>1</b>' });
});

test('in the status bar, the item shows only with something to say, and hides when a read fails', async () => {
  let answer: Promise<INodeKernels | null> = Promise.resolve({ cluster: 'dev', kernels: [KERNEL] });
  let clock = 1_000;
  const item = new NodeKernelStatus({ load: () => answer, current: () => NOTEBOOK, now: () => clock });
  const bar = new StatusBar();
  const changed = new Signal<NodeKernelStatus, void>(item);
  item.changed = () => changed.emit();
  bar.registerStatusItem('node-kernel', { item, isActive: () => item.shown, activeStateChanged: changed });
  expect(item.isHidden).toBe(true);
  await item.read();
  expect(item.shown).toBe(true);
  expect(item.isHidden).toBe(false);
  expect(item.node.textContent).toBe('node kernel: 30 min left');
  clock += 10 * 60 * 1000;
  item.showLeft();
  expect(item.node.textContent).toBe('node kernel: 20 min left');
  answer = Promise.reject(new Error('the server did not answer'));
  await item.read();
  expect(item.shown).toBe(false);
  expect(item.isHidden).toBe(true);
  bar.dispose();
});
