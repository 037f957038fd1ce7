/**
 * The Jobs tab with many jobs, rendered in jsdom: the tab as it is against the same tab as it was
 * in git (`BenchPaged`: 100 rows a page; `BenchAll`: every row), in one jest run. Copied into
 * labextension/test/ and run by bench/panel_jobs.py, which also puts the old components beside
 * the new; not a test of the suite.
 *
 * Prints one `BENCH {json}` line per measurement: how long the first render took (from mounting
 * to the rows in the page), how many elements the page holds, and how long going to the end of
 * the list took (scrolling to the end; the next page for the paged tab).
 */
import * as React from 'react';
import { act } from 'react';

import { JobsView } from '../src/components/JobsView';
import { JobsView as BenchPaged } from '../src/components/BenchPagedJobsView';
import { JobsView as BenchAll } from '../src/components/BenchAllJobsView';
import { IExperiments, IOutcome } from '../src/models';
import { render } from './render';
import { QUEUE_COLUMNS, tableOf } from './tables';

const SIZES = (process.env.BENCH_SIZES ?? '200,2000,20000').split(',').map(Number);
const REPEAT = Number(process.env.BENCH_REPEAT ?? '3');
const VIEW = 800; // the list's height in pixels, as a panel in a 1400×900 window gives it

function queue(size: number): IOutcome {
  const records = Array.from({ length: size }, (_, i) => ({
    job_id: String(1000 + i),
    array_job_id: String(1000 + i),
    name: `job ${1000 + i}`,
    partition: 'gpu',
    state: i % 1000 === 999 ? 'RUNNING' : 'PENDING',
    reason: 'Priority',
    elapsed: 0,
    time_limit: 3600,
    gpus: 1,
    gpu_type: 'a100',
    tasks: 1
  }));
  return {
    ok: true,
    summary: `${size} jobs`,
    artifacts: [],
    data: { kind: 'table', value: tableOf(QUEUE_COLUMNS, records) },
    text: null
  };
}

type Component = (props: React.ComponentProps<typeof JobsView>) => JSX.Element;

async function measure(
  name: string,
  View: Component,
  size: number,
  jobs: IOutcome,
  report = true
): Promise<void> {
  const props = {
    cluster: 'dev',
    visible: true,
    refreshSeconds: 600,
    loadJobs: () => Promise.resolve(jobs),
    loadExperiments: () => Promise.resolve({ experiments: [] } as IExperiments),
    onCancel: () => Promise.resolve(),
    onOpen: () => undefined
  };
  const began = performance.now();
  const { container, unmount } = render(<View {...props} />);
  while (container.querySelector('[data-testid="betty-job-row"]') === null) {
    await act(async () => {
      await new Promise(resolve => setTimeout(resolve, 0));
    });
  }
  const first = performance.now() - began;
  const elements = container.querySelectorAll('*').length;
  let end: number | null = null;
  let endElements: number | null = null;
  const list = container.querySelector<HTMLElement>('[data-testid="betty-jobs-list"]');
  const next = container.querySelector<HTMLElement>('[data-testid="betty-pager-next"]');
  if (list !== null) {
    Object.defineProperty(list, 'clientHeight', { configurable: true, value: VIEW });
    const at = performance.now();
    act(() => {
      list.scrollTop = size * 1000;
      list.dispatchEvent(new Event('scroll'));
    });
    end = performance.now() - at;
    const ids = Array.from(container.querySelectorAll<HTMLElement>('[data-testid="betty-job-row"]'));
    if (ids[ids.length - 1].dataset.jobId !== String(1000 + size - 1)) {
      throw new Error('scrolling to the end did not bring the last job');
    }
    endElements = container.querySelectorAll('*').length;
  } else if (next !== null) {
    const at = performance.now();
    await act(async () => {
      next.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    });
    end = performance.now() - at;
    endElements = container.querySelectorAll('*').length;
  }
  unmount();
  if (!report) {
    return;
  }
  process.stdout.write(`BENCH ${JSON.stringify({ name, size, first, elements, end, endElements })}\n`);
}

it('renders the Jobs tab with many jobs', async () => {
  const tabs: [string, Component][] = [
    ['virtualised', JobsView],
    ['paged', BenchPaged as Component],
    ['all rows', BenchAll as Component]
  ];
  // a run of each first, not reported: the code compiled and warm before anything is timed
  const warm = queue(SIZES[0]);
  for (const [name, View] of tabs) {
    await measure(name, View, SIZES[0], warm, false);
  }
  for (const size of SIZES) {
    const jobs = queue(size);
    for (let run = 0; run < REPEAT; run++) {
      // paired: each run renders the three one after the other, each run starting with
      // another, so that none always follows the slowest (and its garbage)
      for (let k = 0; k < tabs.length; k++) {
        const [name, View] = tabs[(run + k) % tabs.length];
        await measure(name, View, size, jobs);
      }
    }
  }
}, 3_600_000);
