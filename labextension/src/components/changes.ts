/**
 * A view of an object outside React (login questions, waiting approvals) renders again whenever
 * the object's `changed` signal fires.
 */
import { ISignal } from '@lumino/signaling';
import * as React from 'react';

/** Something that says when it changed. */
export interface IChanging {
  readonly changed: ISignal<any, void>;
}

/** Render again whenever `source` changes. */
export function useChanges(source: IChanging): void {
  const [, rendered] = React.useReducer((count: number) => count + 1, 0);
  React.useEffect(() => {
    const changed = () => rendered();
    source.changed.connect(changed);
    rendered(); // a change between the first render and this effect is not missed
    return () => {
      source.changed.disconnect(changed);
    };
  }, [source]);
}
