/**
 * The read-out of job ends: one short spoken line when a watched job ends, through the
 * browser's speech synthesis. The line is built only from Betty's own structured fields (the
 * job's id, its Slurm state put into words, how long it ran), never from text others can
 * write (job names, logs, comments). Off unless the person turns it on.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { IJobUpdateInfo } from './events';

/** What the read-out needs of the browser's `speechSynthesis` (a stub in tests). */
export interface ISpeech {
  speak(utterance: SpeechSynthesisUtterance): void;
  cancel(): void;
}

/** How the read-out reaches the browser; every part is replaceable for tests. */
export interface IReadOutOptions {
  /** The browser's speech synthesis, or null where it has none. */
  speech: ISpeech | null;
  /** An utterance of `text`. */
  utterance: (text: string) => SpeechSynthesisUtterance;
  /** Whether the page is hidden (nothing is spoken then). */
  hidden: () => boolean;
}

/** Slurm's end states in words ("job 4312 finished: out of memory"). */
const STATE_WORDS: Record<string, string> = {
  COMPLETED: 'finished',
  FAILED: 'failed',
  CANCELLED: 'was cancelled',
  TIMEOUT: 'finished: out of time',
  OUT_OF_MEMORY: 'finished: out of memory',
  NODE_FAIL: 'failed: its node failed',
  PREEMPTED: 'was preempted',
  BOOT_FAIL: 'failed to start its node',
  DEADLINE: 'missed its deadline',
  REVOKED: 'was revoked',
  SPECIAL_EXIT: 'ended with a special exit'
};

/** `1234` or an array task `1234_5`: the only job ids spoken as they are. */
const JOB_ID = /^(\d{1,12})(?:_(\d{1,7}))?$/;

/** How long a job ran, in words: "12 minutes", "2 hours" (null when unknown). */
export function spokenDuration(seconds: number | null): string | null {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return null;
  }
  if (seconds < 60) {
    return 'less than a minute';
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) {
    return minutes === 1 ? '1 minute' : `${minutes} minutes`;
  }
  const hours = Math.round(minutes / 60);
  return `${hours} hours`;
}

/**
 * The line spoken for `job`, which ran `seconds` (null when the panel did not see it start):
 * "job 4312 finished: out of memory after 2 hours". Only digits of the id, a fixed phrase
 * for the state and a number of the duration reach it.
 */
export function readOutLine(job: IJobUpdateInfo, seconds: number | null): string {
  const id = JOB_ID.exec(job.job_id.trim());
  const who = id ? `job ${id[1]}${id[2] !== undefined ? ` task ${id[2]}` : ''}` : 'a job';
  const state = job.state.trim().split(/\s+/)[0]?.replace(/\+$/, '').toUpperCase() ?? '';
  const words = STATE_WORDS[state] ?? 'ended';
  const ran = spokenDuration(seconds);
  return ran ? `${who} ${words} after ${ran}` : `${who} ${words}`;
}

/** The browser's own speech synthesis, or null where it has none. */
export function browserReadOut(): IReadOutOptions {
  const available =
    typeof window !== 'undefined' &&
    'speechSynthesis' in window &&
    typeof window.SpeechSynthesisUtterance === 'function';
  return {
    speech: available ? window.speechSynthesis : null,
    utterance: text => new window.SpeechSynthesisUtterance(text),
    hidden: () => typeof document !== 'undefined' && document.hidden
  };
}

/** Speaks job ends while on; {@link ReadOut.changed} fires when it starts or stops speaking. */
export class ReadOut {
  /** Whether the person turned the read-out on (the `readOut` setting). */
  enabled = false;
  /** Whether a line is being spoken now. */
  speaking = false;
  /** The last line announced, for **Play** (null before the first). */
  last: string | null = null;

  private readonly _changed = new Signal<this, void>(this);

  constructor(private readonly _options: IReadOutOptions) {}

  /** Whether this browser can speak at all. */
  get available(): boolean {
    return this._options.speech !== null;
  }

  /** Fires when speaking starts or stops, or the last line changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Announce that `job` ended after `seconds` (null when unknown), when on and the page shows. */
  announce(job: IJobUpdateInfo, seconds: number | null): void {
    if (!this.enabled || !this.available) {
      return;
    }
    this.last = readOutLine(job, seconds);
    this._changed.emit();
    this.play();
  }

  /** Speak the last line again (nothing when hidden, off or none yet). */
  play(): void {
    const speech = this._options.speech;
    if (!this.enabled || speech === null || this.last === null || this._options.hidden()) {
      return;
    }
    speech.cancel();
    const utterance = this._options.utterance(this.last);
    const done = () => {
      if (this._current === utterance) {
        this._current = null;
        this._setSpeaking(false);
      }
    };
    utterance.onend = done;
    utterance.onerror = done;
    this._current = utterance;
    this._setSpeaking(true);
    speech.speak(utterance);
  }

  /** Stop speaking now. */
  stop(): void {
    this._current = null;
    this._options.speech?.cancel();
    this._setSpeaking(false);
  }

  private _setSpeaking(speaking: boolean): void {
    if (this.speaking !== speaking) {
      this.speaking = speaking;
      this._changed.emit();
    }
  }

  private _current: SpeechSynthesisUtterance | null = null;
}
