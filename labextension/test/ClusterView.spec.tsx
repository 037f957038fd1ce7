/**
 * The Cluster tab: partitions by state and the person's share, read only while on screen, paced like the
 * job watcher (twice as long after each unchanged answer, four times as long while the cluster is away).
 */
import * as React from 'react';
import { act } from 'react';

import { CLUSTER_PACE, ClusterView, waitText } from '../src/components/ClusterView';
import { IClusterOverview, IPartitionLoad } from '../src/models';
import { nextWait } from '../src/poll';
import { allByTestId, byTestId, render } from './render';

function partition(name: string, overrides: Partial<IPartitionLoad> = {}): IPartitionLoad {
  return {
    partition: name,
    default: false,
    nodes: { idle: 0, mixed: 1, allocated: 0, down: 0, other: 0 },
    cpus: { allocated: 3, idle: 5, down: 0 },
    gpus: { a100: { allocated: 1, idle: 3, down: 0 } },
    memory_bytes: 1024,
    memory_allocated_bytes: 0,
    running: 2,
    pending: 4,
    pending_with_estimate: 1,
    next_start_seconds: 720,
    last_start_seconds: 10800,
    mine: { running: 1, pending: 0, cpus: 2, gpus: 1 },
    ...overrides
  };
}

function answer(partitions: IPartitionLoad[], readAt = '2026-01-01T00:00:00'): IClusterOverview {
  return {
    cluster: 'dev',
    ok: true,
    message: 'ok',
    overview: {
      user: 'ada',
      read_at: readAt,
      partitions,
      mine: { running: 1, pending: 0, cpus: 2, gpus: 1 }
    }
  };
}

async function settle(ms = 0): Promise<void> {
  await act(async () => {
    await jest.advanceTimersByTimeAsync(ms);
  });
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('ClusterView', () => {
  it('shows each partition, its bars and the share, hostile names as text', async () => {
    const hostile = '<img src=x onerror=alert(1)>\u202egpu';
    const load = jest.fn(async () => answer([partition(hostile, { default: true }), partition('cpu')]));
    const { container } = render(<ClusterView cluster="dev" visible={true} loadOverview={load} />);
    await settle();
    const sections = allByTestId(container, 'betty-cluster-partition');
    expect(sections.map(s => s.getAttribute('data-partition'))).toEqual([hostile, 'cpu']);
    expect(container.querySelector('img')).toBeNull();
    expect(sections[0].textContent).toContain('<img src=x onerror=alert(1)>');
    expect(sections[0].textContent).not.toContain('\u202e');
    const cpus = allByTestId(sections[0], 'betty-cluster-cpus')[0];
    expect(cpus.getAttribute('data-used')).toBe('3');
    expect(cpus.getAttribute('data-total')).toBe('8');
    expect(byTestId(container, 'betty-cluster-share').textContent).toContain('1 running (2 CPUs, 1 GPUs)');
    expect(sections[0].textContent).toContain('next start ~12 min');
  });

  it('reads nothing while hidden and stops when hidden again', async () => {
    const load = jest.fn(async () => answer([partition('gpu')]));
    const { rerender } = render(<ClusterView cluster="dev" visible={false} loadOverview={load} />);
    await settle(CLUSTER_PACE.slowest * 2);
    expect(load).not.toHaveBeenCalled();
    rerender(<ClusterView cluster="dev" visible={true} loadOverview={load} />);
    await settle();
    expect(load).toHaveBeenCalledTimes(1);
    rerender(<ClusterView cluster="dev" visible={false} loadOverview={load} />);
    await settle(CLUSTER_PACE.slowest * 2);
    expect(load).toHaveBeenCalledTimes(1);
  });

  it('waits twice as long after each answer that changed nothing, and soon after a change', async () => {
    let running = 2;
    let reads = 0;
    const load = jest.fn(async () => answer([partition('gpu', { running })], `t${++reads}`));
    render(<ClusterView cluster="dev" visible={true} loadOverview={load} />);
    await settle();
    expect(load).toHaveBeenCalledTimes(1);
    const fastest = CLUSTER_PACE.fastest;
    await settle(fastest); // 2nd read: the same cluster (only the time differs)
    expect(load).toHaveBeenCalledTimes(2);
    await settle(fastest * 2 - 1); // the next waits twice as long
    expect(load).toHaveBeenCalledTimes(2);
    await settle(1);
    expect(load).toHaveBeenCalledTimes(3);
    running = 3; // a change: then the pace is the fastest again
    await settle(fastest * 4);
    expect(load).toHaveBeenCalledTimes(4);
    await settle(fastest);
    expect(load).toHaveBeenCalledTimes(5);
  });

  it('backs off four times as long while the cluster does not answer, and says why', async () => {
    const load = jest.fn(
      async (): Promise<IClusterOverview> => ({
        cluster: 'dev',
        ok: false,
        message: 'sinfo failed: <b>x</b>',
        overview: null
      })
    );
    const { container } = render(<ClusterView cluster="dev" visible={true} loadOverview={load} />);
    await settle();
    expect(byTestId(container, 'betty-cluster-error').textContent).toBe('sinfo failed: <b>x</b>');
    await settle(CLUSTER_PACE.fastest * 4 - 1);
    expect(load).toHaveBeenCalledTimes(1);
    await settle(1);
    expect(load).toHaveBeenCalledTimes(2);
  });
});

describe('pacing', () => {
  it("is the job watcher's rule", () => {
    const pace = { fastest: 2, slowest: 60 };
    expect(nextWait(2, 'same', pace)).toBe(4);
    expect(nextWait(40, 'same', pace)).toBe(60);
    expect(nextWait(40, 'changed', pace)).toBe(2);
    expect(nextWait(8, 'failed', pace)).toBe(32);
    expect(nextWait(200, 'failed', pace)).toBe(240);
  });

  it('writes waits as a person reads them', () => {
    expect(waitText(null)).toBe('unknown');
    expect(waitText(30)).toBe('now');
    expect(waitText(720)).toBe('~12 min');
    expect(waitText(3 * 3600)).toBe('~3 h');
  });
});
