import {
  cronWords,
  estimateWords,
  formatAgo,
  formatBytes,
  formatClock,
  formatDuration,
  formatMilliseconds,
  formatMinutes,
  formatTimeLimit,
  formatStamp,
  formatTokens,
  resourceWords,
  summaryParts
} from '../src/format';

describe('durations and time limits', () => {
  it.each([
    [300, '0:05:00'],
    [43230.5, '12:00:30'],
    [183845, '2-03:04:05'],
    [93784.9, '1-02:03:04'],
    [0, '0:00:00'],
    [null, ''],
    ['UNLIMITED', 'UNLIMITED']
  ])('formatDuration(%s) is %s', (value, text) => {
    expect(formatDuration(value)).toBe(text);
  });

  it('a job without a time limit reads INFINITE, never blank', () => {
    expect(formatTimeLimit(null)).toBe('INFINITE');
    expect(formatTimeLimit(undefined)).toBe('INFINITE');
    expect(formatTimeLimit(3600)).toBe('1:00:00');
  });

  it.each([
    [5, '5 min'],
    [0, '0 min'],
    [90, '1 h 30 min'],
    [120, '2 h'],
    [2880, '2 days'],
    [1441, '1 day 1 min'],
    [null, ''],
    ['5', '']
  ])('formatMinutes(%s) is %s', (value, text) => {
    expect(formatMinutes(value)).toBe(text);
  });
});

describe('sizes and counts', () => {
  it.each([
    [104857600, '100 MiB'],
    [512, '512 B'],
    [1536, '1.5 KiB'],
    [1.5 * 2 ** 30, '1.5 GiB'],
    [2 ** 40, '1 TiB'],
    [600 * 2 ** 20, '600 MiB'],
    [0, '0 B'],
    [-1, ''],
    [null, ''],
    ['104857600', '']
  ])('formatBytes(%s) is %s', (value, text) => {
    expect(formatBytes(value)).toBe(text);
  });

  it.each([
    [40.4, '40 ms'],
    [1234, '1.2 s'],
    [3000, '3 s'],
    [125_000, '2 min 5 s']
  ])('formatMilliseconds(%s) is %s', (value, text) => {
    expect(formatMilliseconds(value)).toBe(text);
  });

  it.each([
    [950, '950'],
    [12_345, '12.3k'],
    [1_234_567, '1.2M']
  ])('formatTokens(%s) is %s', (value, text) => {
    expect(formatTokens(value)).toBe(text);
  });

  it('writes the time something was read on a 24-hour clock', () => {
    expect(formatClock(new Date(2026, 10, 22, 14, 3, 9))).toMatch(/^14.03.09$/);
    expect(formatClock(new Date(2026, 10, 22, 0, 3, 9))).toMatch(/^00.03.09$/);
  });

  it('says how long ago, then the date', () => {
    const now = 1_800_000_000;
    expect(formatAgo(now - 10, now)).toBe('just now');
    expect(formatAgo(now - 300, now)).toBe('5 min ago');
    expect(formatAgo(now - 3 * 3600, now)).toBe('3 h ago');
    expect(formatAgo(now - 3 * 86_400, now)).not.toMatch(/ago/);
  });
});

describe('what a recorded job asked for', () => {
  it('reads its resources in units', () => {
    expect(
      resourceWords({ time_minutes: 5, memory_bytes: 104857600, gpus: '1 × a100', nodes: '2' })
    ).toBe('5 min · 100 MiB · 1 × a100 · 2 nodes');
    expect(resourceWords({ cpus_per_task: '4', ntasks: 1 })).toBe('1 task · 4 CPUs per task');
    expect(resourceWords({})).toBe('');
    expect(resourceWords({ memory_bytes: '1e9', nodes: 'many' })).toBe('');
  });

  it('writes a ledger time to the minute', () => {
    expect(formatStamp('2026-11-22T10:03:59')).toBe('2026-11-22 10:03');
    expect(formatStamp('yesterday')).toBe('yesterday');
  });
});

describe('cron schedules in words', () => {
  it.each([
    ['0 8 * * *', 'daily at 08:00'],
    ['30 9 * * 1', 'every Monday at 09:30'],
    ['30 9 * * 7', 'every Sunday at 09:30'],
    ['0 18 * * 1,4', 'every Monday and Thursday at 18:00'],
    ['45 7 * * 1-5', 'weekdays at 07:45'],
    ['0 10 * * 6,0', 'weekends at 10:00'],
    ['*/15 * * * *', 'every 15 minutes'],
    ['* * * * *', 'every minute'],
    ['*/1 * * * *', 'every minute'],
    ['0 * * * *', 'every hour'],
    ['5 * * * *', 'every hour at :05'],
    ['0 */6 * * *', 'every 6 hours'],
    ['0 8 1 * *', 'monthly on day 1 at 08:00'],
    ['  0   8 * *   * ', 'daily at 08:00']
  ])('%s is %s', (cron, words) => {
    expect(cronWords(cron)).toBe(words);
  });

  it.each([
    '0 8 * 1 *',
    '0 8 1 * 1',
    '0 8-17 * * *',
    '0 8 * * mon',
    '0 8 * *',
    '61 8 * * *',
    '0 24 * * *',
    '0 8 * * 1-3',
    '<img src=x onerror=alert(1)> 8 * * *',
    ''
  ])('%s is unusual: the cron string itself says it', cron => {
    expect(cronWords(cron)).toBeNull();
  });
});

describe('a GPU memory estimate as its breakdown', () => {
  const estimate = {
    model: 'Llama-3.1-8B',
    method: 'lora',
    precision: 'bf16-mixed',
    gpus: 1,
    peak_gib: 73.111,
    breakdown: {
      weights: 14.983,
      gradients: 0.0,
      optimizer: 0.051,
      activations: 50.977,
      kv_cache: 0.0,
      runtime: 7.101
    },
    peak_moment: 'start of the backward pass',
    notes: ['gradients appear during backward']
  };

  it('reads its peak, what it is about and its parts, largest first', () => {
    expect(estimateWords(estimate)).toEqual({
      peak: '73.1 GiB per GPU at the start of the backward pass',
      about: 'Llama-3.1-8B · lora · bf16-mixed · 1 GPU',
      parts: [
        { name: 'activations', size: '51.0 GiB' },
        { name: 'weights', size: '15.0 GiB' },
        { name: 'runtime', size: '7.1 GiB' },
        { name: 'optimizer', size: '0.1 GiB' }
      ],
      notes: ['gradients appear during backward']
    });
  });

  it('is not an estimate without a numeric peak', () => {
    expect(estimateWords({ model: 'x' })).toBeNull();
    expect(estimateWords({ peak_gib: '73' })).toBeNull();
    expect(estimateWords(null)).toBeNull();
    expect(estimateWords([1, 2])).toBeNull();
  });

  it('reads only known fields of a hostile estimate, and keeps their text as text', () => {
    const words = estimateWords({
      peak_gib: 2,
      model: '<img src=x onerror=alert(1)>',
      breakdown: { '<b>x</b>': 1, weights: 'lots', activations: Infinity },
      notes: [{ html: '<script>' }, 'fine'],
      gpus: '8'
    });
    expect(words).toEqual({
      peak: '2.0 GiB per GPU',
      about: '<img src=x onerror=alert(1)>',
      parts: [{ name: '<b>x</b>', size: '1.0 GiB' }],
      notes: ['fine']
    });
  });
});

describe("a tool's summary", () => {
  it('splits the headline from the table under it', () => {
    expect(summaryParts('2 job(s): 2 RUNNING\n job_id name\n 1 a\n')).toEqual({
      headline: '2 job(s): 2 RUNNING',
      rest: ' job_id name\n 1 a'
    });
    expect(summaryParts('submitted job 5')).toEqual({ headline: 'submitted job 5', rest: '' });
  });
});
