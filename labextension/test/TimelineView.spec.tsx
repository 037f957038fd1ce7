/**
 * The Timeline tab: lanes with their links, the scrubber showing the log as it stood, a call's
 * details on selection, filters asked of the server, Replay (previews only) and Export, and
 * hostile text from the log shown as text.
 */
import { act } from 'react';
import * as React from 'react';

import { ITimelineSource, TimelineView } from '../src/components/TimelineView';
import {
  axisPercent,
  callsSoFar,
  IReplayLine,
  ITimeline,
  ITimelineCall,
  ITimelineFilters,
  replayCounts,
  REPLAY_WORDS,
  scrubberStep,
  sessionName,
  timeRange
} from '../src/timeline';
import { allByTestId, byTestId, click, render, type } from './render';

const HOSTILE = '<img src=x onerror="window.pwned=1">';

function call(callId: string, ts: number, overrides: Partial<ITimelineCall> = {}): ITimelineCall {
  return {
    ts,
    session_id: 's-main',
    call_id: callId,
    tool: 'cluster_submit',
    tier: 2,
    task: null,
    args: {},
    preview: { kind: 'command', title: 'submit train.sh', text: 'sbatch train.sh', details: {} },
    decision: 'approved',
    approver: 'ada (side panel)',
    ok: true,
    summary: 'job 42 submitted',
    duration_ms: 1500,
    lane: 's-main',
    ...overrides
  };
}

const TIMELINE: ITimeline = {
  calls: [
    call('c1', 1000),
    call('c2', 1010, { tool: 'delegate_tasks', decision: 'auto', approver: null }),
    call('c3', 1020, {
      tool: 'cluster_read',
      decision: 'denied',
      ok: null,
      summary: HOSTILE,
      lane: 'helper-1',
      task: 'read logs'
    }),
    call('a1', 1030, { session_id: 'automation-r1', lane: 'automation-r1', tool: 'wiki_search' })
  ],
  lanes: [
    {
      id: 's-main',
      kind: 'session',
      session_id: 's-main',
      title: 's-main',
      started_by: null,
      trigger: ''
    },
    {
      id: 'helper-1',
      kind: 'helper',
      session_id: 's-main',
      title: 'read \u202elogs',
      started_by: 'c2',
      trigger: ''
    },
    {
      id: 'automation-r1',
      kind: 'automation',
      session_id: 'automation-r1',
      title: 'Daily digest',
      started_by: null,
      trigger: 'schedule'
    }
  ],
  sessions: ['automation-r1', 's-main'],
  tools: ['cluster_read', 'cluster_submit', 'delegate_tasks', 'wiki_search'],
  decisions: ['approved', 'auto', 'denied'],
  skipped: 0
};

const REPLAY: IReplayLine[] = [
  {
    call_id: 'c1',
    session_id: 's-main',
    ts: 1000,
    tool: 'cluster_submit',
    status: 'same',
    diff: '',
    recorded: null,
    current: null
  },
  {
    call_id: 'c3',
    session_id: 's-main',
    ts: 1020,
    tool: 'cluster_read',
    status: 'changed',
    diff: "title: 'read a' → 'read b'",
    recorded: null,
    current: { kind: 'text', title: 'read b', text: '', details: {} }
  }
];

class FakeSource implements ITimelineSource {
  asked: ITimelineFilters[] = [];
  replayed: ITimelineFilters[] = [];
  bundled: string[] = [];

  async timeline(filters: ITimelineFilters): Promise<ITimeline> {
    this.asked.push(filters);
    return TIMELINE;
  }

  async replay(filters: ITimelineFilters): Promise<{ replay: IReplayLine[] }> {
    this.replayed.push(filters);
    return { replay: REPLAY };
  }

  async bundle(session: string): Promise<Blob> {
    this.bundled.push(session);
    return new Blob(['zip'], { type: 'application/zip' });
  }
}

async function shown(source: FakeSource, save = jest.fn()): Promise<HTMLElement> {
  let container: HTMLElement | null = null;
  await act(async () => {
    container = render(<TimelineView source={source} visible={true} save={save} />).container;
  });
  return container!;
}

function choose(select: HTMLSelectElement, value: string): Promise<void> {
  const setter = Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, 'value')!.set!;
  return act(async () => {
    setter.call(select, value);
    select.dispatchEvent(new Event('change', { bubbles: true }));
  });
}

describe('the timeline arithmetic', () => {
  it('places calls on the axis and keeps those made by a moment', () => {
    const calls = TIMELINE.calls;
    expect(timeRange(calls)).toEqual([1_000_000, 1_030_000]);
    expect(timeRange([calls[0]])).toEqual([1_000_000, 1_001_000]);
    expect(timeRange([call('x', 1000.0004)])).toEqual([1_000_000, 1_001_000]);
    expect(axisPercent(1_015_000, 1_000_000, 1_030_000)).toBe(50);
    expect(axisPercent(2_000_000, 1_000_000, 1_030_000)).toBe(100);
    expect(callsSoFar(calls, 1_010_000).map(c => c.call_id)).toEqual(['c1', 'c2']);
    expect(callsSoFar([call('x', 1010.0009)], 1_010_000)).toHaveLength(1); // to the millisecond
    expect(replayCounts(REPLAY)).toEqual([
      ['same', 1],
      ['changed', 1]
    ]);
  });
});

describe('the scrubber keys and session names', () => {
  it('steps from call to call, ten at a time, and to either end', () => {
    const calls = TIMELINE.calls; // at 1000, 1010, 1020, 1030 s
    expect(scrubberStep(calls, 1_000_000, 'ArrowRight')).toBe(1_010_000);
    expect(scrubberStep(calls, 1_005_000, 'ArrowUp')).toBe(1_010_000);
    expect(scrubberStep(calls, 1_010_000, 'ArrowLeft')).toBe(1_000_000);
    expect(scrubberStep(calls, 1_000_000, 'ArrowLeft')).toBe(1_000_000);
    expect(scrubberStep(calls, 1_030_000, 'ArrowRight')).toBe(1_030_000);
    expect(scrubberStep(calls, 1_000_000, 'PageUp')).toBe(1_030_000);
    expect(scrubberStep(calls, 1_030_000, 'PageDown')).toBe(1_000_000);
    expect(scrubberStep(calls, 1_020_000, 'Home')).toBe(1_000_000);
    expect(scrubberStep(calls, 1_000_000, 'End')).toBe(1_030_000);
    expect(scrubberStep(calls, 1_000_000, 'a')).toBeNull();
    expect(scrubberStep([], 0, 'ArrowRight')).toBeNull();
    const many = Array.from({ length: 30 }, (_, i) => call(`m${i}`, 2000 + i));
    expect(scrubberStep(many, 2_000_000, 'PageUp')).toBe(2_010_000);
    expect(scrubberStep(many, 2_015_000, 'PageDown')).toBe(2_005_000);
  });

  it('names a session by whom it worked for and when it began, not by its id', () => {
    const at = (seconds: number) => `t${seconds}`;
    const calls = [call('x', 5, { session_id: 'abc123def456', task: 'claude-code (MCP)' }), ...TIMELINE.calls];
    expect(sessionName('s-main', calls, at)).toBe('chat from t1000');
    expect(sessionName('abc123def456', calls, at)).toBe('for claude-code (MCP) from t5');
    expect(sessionName('automation-r1', calls, at)).toBe('automation run from t1030');
    expect(sessionName('0123456789abcdef', calls, at)).toBe('session 01234567');
  });
});

describe('a replay in words', () => {
  it('says plainly what could not be previewed again, and never counts it as failed', () => {
    const gone: IReplayLine = { ...REPLAY[0], call_id: 'c9', status: 'gone', diff: 'Slurm no longer knows job 42' };
    const counts = replayCounts([...REPLAY, gone]);
    expect(counts).toEqual([
      ['same', 1],
      ['changed', 1],
      ['gone', 1]
    ]);
    expect(REPLAY_WORDS.gone).toBe('no longer there to preview (a job Slurm forgot, say)');
  });
});

describe('TimelineView', () => {
  it('moves the scrubber to the next and previous call with the arrow keys', async () => {
    const container = await shown(new FakeSource());
    const scrubber = byTestId<HTMLInputElement>(container, 'betty-timeline-scrubber');
    const press = (key: string) =>
      act(async () => {
        scrubber.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true }));
      });
    await press('Home');
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('1 of 4 calls');
    await press('ArrowRight');
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('2 of 4 calls');
    await press('ArrowRight');
    await press('ArrowLeft');
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('2 of 4 calls');
    await press('End');
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('4 of 4 calls');
  });

  it("names each session's lane and choice as a person knows it, its id in the tooltip", async () => {
    const container = await shown(new FakeSource());
    const title = allByTestId(container, 'betty-timeline-lane-title')[0];
    expect(title.textContent).toMatch(/^chat from \d\d:\d\d/);
    expect(title.title).toBe('s-main');
    const options = Array.from(
      byTestId<HTMLSelectElement>(container, 'betty-timeline-session').options
    ).map(option => option.textContent);
    expect(options[1]).toMatch(/^automation run from /);
    expect(options[2]).toMatch(/^chat from /);
  });

  it('lets a tool name break after an underscore only', async () => {
    const container = await shown(new FakeSource());
    const name = allByTestId(container, 'betty-timeline-call')[1].querySelector('.betty-Timeline-toolName')!;
    expect(name.textContent).toBe('delegate_tasks');
    expect(name.innerHTML).toBe('delegate_<wbr>tasks');
  });

  it('shows a lane per session, helper and automation, the helper linked to the call that started it', async () => {
    const container = await shown(new FakeSource());
    const lanes = allByTestId(container, 'betty-timeline-lane');
    expect(lanes.map(lane => lane.dataset.kind)).toEqual(['session', 'helper', 'automation']);
    expect(lanes[1].textContent).toContain('read \\u202elogs'); // the bidi override written out, not obeyed
    expect(lanes[2].textContent).toContain('fired by schedule');
    const link = byTestId(container, 'betty-timeline-started-by');
    expect(link.textContent).toBe('← started by delegate_tasks c2');
    await click(link);
    expect(byTestId(container, 'betty-timeline-detail-tool').textContent).toBe('delegate_tasks');
  });

  it('shows the log as it stood where the scrubber is', async () => {
    const container = await shown(new FakeSource());
    expect(allByTestId(container, 'betty-timeline-call')).toHaveLength(4);
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('4 of 4 calls');
    type(byTestId<HTMLInputElement>(container, 'betty-timeline-scrubber'), '1012000');
    expect(allByTestId(container, 'betty-timeline-call')).toHaveLength(2);
    expect(allByTestId(container, 'betty-timeline-dot')).toHaveLength(2);
    expect(byTestId(container, 'betty-timeline-at').textContent).toContain('2 of 4 calls');
    type(byTestId<HTMLInputElement>(container, 'betty-timeline-scrubber'), '1030000');
    expect(allByTestId(container, 'betty-timeline-call')).toHaveLength(4);
  });

  it("shows a selected call's decision, approver, result and duration, its text as text", async () => {
    const container = await shown(new FakeSource());
    await click(allByTestId(container, 'betty-timeline-call')[2]);
    expect(byTestId(container, 'betty-timeline-detail-decision').textContent).toBe('denied');
    expect(allByTestId(container, 'betty-timeline-call')[2].textContent).toContain('cluster_read · for read logs');
    expect(byTestId(container, 'betty-timeline-detail-result').textContent).toBe(
      `did not run: ${HOSTILE}`
    );
    expect(container.querySelector('img')).toBeNull();
    expect(byTestId(container, 'betty-timeline-details').textContent).toContain('1.5 s');
    await click(allByTestId(container, 'betty-timeline-call')[0]);
    expect(byTestId(container, 'betty-timeline-detail-approver').textContent).toBe(
      'ada (side panel)'
    );
    expect(byTestId(container, 'betty-preview').textContent).toContain('sbatch train.sh');
  });

  it('asks the server for the filtered calls', async () => {
    const source = new FakeSource();
    const container = await shown(source);
    await choose(byTestId(container, 'betty-timeline-decision'), 'denied');
    await choose(byTestId(container, 'betty-timeline-tool'), 'cluster_read');
    expect(source.asked[source.asked.length - 1]).toEqual({
      session: '',
      tool: 'cluster_read',
      decision: 'denied'
    });
  });

  it('replays previews only and says which changed', async () => {
    const source = new FakeSource();
    const container = await shown(source);
    await click(byTestId(container, 'betty-timeline-replay'));
    expect(source.replayed).toEqual([{ session: '', tool: '', decision: '' }]);
    expect(byTestId(container, 'betty-timeline-replay-summary').textContent).toContain(
      'a dry run (previews only, nothing ran): 2 previews — 1 same, 1 changed'
    );
    expect(allByTestId(container, 'betty-timeline-replay-status').map(s => s.textContent)).toEqual([
      'same',
      'changed'
    ]);
    await click(allByTestId(container, 'betty-timeline-call')[2]);
    expect(byTestId(container, 'betty-timeline-replay-detail').textContent).toContain(
      "title: 'read a' → 'read b'"
    );
  });

  it('exports the bug bundle of the chosen session only', async () => {
    const source = new FakeSource();
    const save = jest.fn();
    const container = await shown(source, save);
    const exportButton = byTestId<HTMLButtonElement>(container, 'betty-timeline-export');
    expect(exportButton.disabled).toBe(true);
    await choose(byTestId(container, 'betty-timeline-session'), 's-main');
    expect(exportButton.disabled).toBe(false);
    await click(exportButton);
    expect(source.bundled).toEqual(['s-main']);
    expect(save).toHaveBeenCalledWith(expect.any(Blob), 'betty-bundle-s-main.zip');
    expect(byTestId(container, 'betty-timeline-exported').textContent).toContain(
      'every secret removed'
    );
  });
});
