/**
 * Desktop notices of job ends over a stub Notification API: permission is asked only when the
 * person turns them on, one notice per ended job, built from Betty's own fields only.
 */
import { DesktopNotices, IDesktop } from '../src/desktopNotices';
import { IJobUpdateInfo } from '../src/events';

class StubDesktop implements IDesktop {
  state = 'default';
  asked = 0;
  shown: { title: string; body: string }[] = [];

  permission(): string {
    return this.state;
  }

  request(): Promise<string> {
    this.asked += 1;
    this.state = 'granted';
    return Promise.resolve(this.state);
  }

  show(title: string, body: string): void {
    this.shown.push({ title, body });
  }
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

describe('DesktopNotices', () => {
  it('asks for permission only when the person turns them on', async () => {
    const desktop = new StubDesktop();
    const notices = new DesktopNotices(desktop);
    notices.setEnabled(true, false); // read at load: no question
    expect(desktop.asked).toBe(0);
    notices.setEnabled(false, true);
    notices.setEnabled(true, true);
    await Promise.resolve();
    expect(desktop.asked).toBe(1);
    notices.setEnabled(true, true); // already on: not asked again
    expect(desktop.asked).toBe(1);
  });

  it('shows one notice per ended job, in Betty words only', () => {
    const desktop = new StubDesktop();
    desktop.state = 'granted';
    const notices = new DesktopNotices(desktop);
    notices.announce(job(), 120); // off: nothing
    expect(desktop.shown).toEqual([]);
    notices.setEnabled(true, false);
    notices.announce(job({ job_id: '<img src=x>@channel' }), null);
    notices.announce(job(), 7200);
    notices.announce(job(), 7200); // the same end again (another chat's copy): once
    notices.announce(job({ job_id: '4313', state: 'COMPLETED' }), 30);
    expect(desktop.shown).toEqual([
      { title: 'Betty: a job ended', body: 'A job finished: out of memory' },
      { title: 'Betty: a job ended', body: 'Job 4312 finished: out of memory after 2 hours' },
      { title: 'Betty: a job ended', body: 'Job 4313 finished after less than a minute' }
    ]);
  });

  it('shows nothing without the permission or without the API', () => {
    const desktop = new StubDesktop();
    desktop.state = 'denied';
    const notices = new DesktopNotices(desktop);
    notices.setEnabled(true, true);
    notices.announce(job(), 1);
    expect(desktop.shown).toEqual([]);
    expect(desktop.asked).toBe(0);
    const none = new DesktopNotices(null);
    none.setEnabled(true, true);
    none.announce(job(), 1);
    expect(none.available).toBe(false);
  });
});
