/**
 * The read-out's bar under the header while the `readOut` setting is on: the last line
 * spoken, **Play** and **Stop**, and *speaking…* while it speaks; or one line saying the
 * browser cannot speak.
 */
import * as React from 'react';

import { ReadOut } from '../readout';
import { useChanges } from './changes';

/** What {@link ReadOutBar} shows. */
export interface IReadOutBarProps {
  readOut: ReadOut;
}

/** The read-out's controls (nothing while the setting is off). */
export function ReadOutBar({ readOut }: IReadOutBarProps): JSX.Element | null {
  useChanges(readOut);
  if (!readOut.enabled) {
    return null;
  }
  if (!readOut.available) {
    return (
      <div className="betty-ReadOut" data-testid="betty-readout-unavailable">
        Read-out unavailable: this browser has no speech synthesis
      </div>
    );
  }
  return (
    <div className="betty-ReadOut" data-testid="betty-readout">
      <span className="betty-ReadOut-line" data-testid="betty-readout-line">
        {readOut.last ?? 'Read-out on: job ends are spoken'}
      </span>
      {readOut.speaking && (
        <span className="betty-ReadOut-speaking" role="status" data-testid="betty-readout-speaking">
          speaking…
        </span>
      )}
      <button
        className="betty-ReadOut-button"
        data-testid="betty-readout-play"
        disabled={readOut.last === null || readOut.speaking}
        onClick={() => readOut.play()}
      >
        Play
      </button>
      <button
        className="betty-ReadOut-button"
        data-testid="betty-readout-stop"
        disabled={!readOut.speaking}
        onClick={() => readOut.stop()}
      >
        Stop
      </button>
    </div>
  );
}
