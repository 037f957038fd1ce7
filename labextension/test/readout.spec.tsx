/**
 * The read-out of job ends over a stub speech synthesis: the line is built from Betty's own
 * fields only, nothing is spoken while off, hidden or unavailable, and Stop cancels.
 */
import * as React from 'react';
import { act } from 'react';

import { IJobUpdateInfo } from '../src/events';
import { ReadOut, readOutLine, spokenDuration } from '../src/readout';
import { ReadOutBar } from '../src/components/ReadOutBar';
import { byTestId, click, render } from './render';

/** Records what it is asked to say, and cancels. */
class StubSpeech {
  spoken: SpeechSynthesisUtterance[] = [];
  cancelled = 0;

  speak(utterance: SpeechSynthesisUtterance): void {
    this.spoken.push(utterance);
  }

  cancel(): void {
    this.cancelled += 1;
  }

  get texts(): string[] {
    return this.spoken.map(utterance => utterance.text);
  }
}

function stubUtterance(text: string): SpeechSynthesisUtterance {
  return { text, onend: null, onerror: null } as unknown as SpeechSynthesisUtterance;
}

function job(overrides: Partial<IJobUpdateInfo> = {}): IJobUpdateInfo {
  return {
    job_id: '4312',
    cluster: 'dev',
    state: 'OUT_OF_MEMORY',
    previous: 'RUNNING',
    page: null,
    notebook: null,
    ...overrides
  };
}

function readOut(options: { speech?: StubSpeech | null; hidden?: boolean } = {}) {
  const speech = options.speech === undefined ? new StubSpeech() : options.speech;
  const out = new ReadOut({
    speech,
    utterance: stubUtterance,
    hidden: () => options.hidden ?? false
  });
  return { speech, out };
}

describe('readOutLine', () => {
  it('says the id, the end state in words and how long it ran', () => {
    expect(readOutLine(job(), 7200)).toBe('job 4312 finished: out of memory after 2 hours');
    expect(readOutLine(job({ state: 'COMPLETED' }), 600)).toBe('job 4312 finished after 10 minutes');
    expect(readOutLine(job({ state: 'CANCELLED by 1000' }), null)).toBe('job 4312 was cancelled');
    expect(readOutLine(job({ job_id: '88_3', state: 'TIMEOUT' }), 30)).toBe(
      'job 88 task 3 finished: out of time after less than a minute'
    );
  });

  it('speaks no text others can write: a hostile id or state becomes fixed words', () => {
    // A newer server's payload may carry more fields (a job name): none of them is read.
    const hostile = {
      ...job({
        job_id: '<img src=x> rm -rf ~',
        state: 'FAILED <img> rm -rf',
        page: 'wiki/<img> rm -rf.md',
        notebook: '<img> rm -rf.ipynb'
      }),
      name: '<img> rm -rf'
    } as IJobUpdateInfo;
    const line = readOutLine(hostile, 60);
    expect(line).toBe('a job failed after 1 minute');
    expect(line).not.toContain('<img>');
    expect(line).not.toContain('rm -rf');
    expect(readOutLine(job({ state: '<img> rm -rf' }), null)).toBe('job 4312 ended');
  });

  it('puts durations into words', () => {
    expect(spokenDuration(null)).toBeNull();
    expect(spokenDuration(-5)).toBeNull();
    expect(spokenDuration(89 * 60)).toBe('89 minutes');
    expect(spokenDuration(5 * 3600 + 100)).toBe('5 hours');
  });
});

describe('ReadOut', () => {
  it('speaks nothing while off (the default)', () => {
    const { speech, out } = readOut();
    out.announce(job(), 7200);
    expect(out.enabled).toBe(false);
    expect(speech!.spoken).toEqual([]);
    expect(out.last).toBeNull();
  });

  it('speaks one line when on, and Stop cancels it', () => {
    const { speech, out } = readOut();
    out.enabled = true;
    out.announce(job(), 7200);
    expect(speech!.texts).toEqual(['job 4312 finished: out of memory after 2 hours']);
    expect(out.speaking).toBe(true);
    const cancelledBefore = speech!.cancelled;
    out.stop();
    expect(speech!.cancelled).toBe(cancelledBefore + 1);
    expect(out.speaking).toBe(false);
  });

  it('stops showing speaking when the utterance ends', () => {
    const { speech, out } = readOut();
    out.enabled = true;
    out.announce(job(), null);
    const utterance = speech!.spoken[0];
    utterance.onend!({} as SpeechSynthesisEvent);
    expect(out.speaking).toBe(false);
  });

  it('speaks nothing while the page is hidden', () => {
    const { speech, out } = readOut({ hidden: true });
    out.enabled = true;
    out.announce(job(), 7200);
    expect(speech!.spoken).toEqual([]);
    expect(out.speaking).toBe(false);
  });

  it('is unavailable without speech synthesis, and speaks nothing', () => {
    const { out } = readOut({ speech: null });
    out.enabled = true;
    out.announce(job(), 7200);
    expect(out.available).toBe(false);
    expect(out.speaking).toBe(false);
  });
});

describe('ReadOutBar', () => {
  it('shows nothing while off', () => {
    const { out } = readOut();
    const { container } = render(<ReadOutBar readOut={out} />);
    expect(container.querySelector('[data-testid^="betty-readout"]')).toBeNull();
  });

  it('says the read-out is unavailable where the browser cannot speak', () => {
    const { out } = readOut({ speech: null });
    out.enabled = true;
    const { container } = render(<ReadOutBar readOut={out} />);
    expect(
      container.querySelector('[data-testid="betty-readout-unavailable"]')?.textContent
    ).toContain('unavailable');
  });

  it('shows speaking while it speaks; Stop cancels and Play speaks the line again', async () => {
    const { speech, out } = readOut();
    out.enabled = true;
    const { container } = render(<ReadOutBar readOut={out} />);
    act(() => out.announce(job(), 7200));
    const find = (id: string) => container.querySelector(`[data-testid="betty-readout-${id}"]`);
    expect(find('line')?.textContent).toBe('job 4312 finished: out of memory after 2 hours');
    expect(find('speaking')).not.toBeNull();
    await click(byTestId(container, 'betty-readout-stop'));
    expect(find('speaking')).toBeNull();
    expect(out.speaking).toBe(false);
    await click(byTestId(container, 'betty-readout-play'));
    expect(speech!.texts).toHaveLength(2);
    expect(find('speaking')).not.toBeNull();
  });
});
