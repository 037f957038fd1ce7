/**
 * The context chip above the prompt box: what the next message tells Betty about where the
 * person works (the active notebook and cell, the folder, the git branch, the kernel's recent
 * errors). Everything it sends is on it; removing it sends none of it.
 */
import * as React from 'react';

import type { ISentContext } from '../contract/events';
import { IContextBulletin } from '../contract/serverApi';
import { NotebookContext } from '../notebookContext';
import { visibleText } from '../safe';

/** The bulletin `source` holds now, re-rendered as it changes. */
export function useBulletin(source: NotebookContext | null): IContextBulletin | null {
  const [bulletin, setBulletin] = React.useState(source?.bulletin ?? null);
  React.useEffect(() => {
    if (source === null) {
      return undefined;
    }
    const changed = () => setBulletin(source.bulletin);
    changed();
    source.changed.connect(changed);
    return () => {
      source.changed.disconnect(changed);
    };
  }, [source]);
  return bulletin;
}

/** The lines the chip shows: exactly the facts the bulletin sends. */
export function bulletinLines(bulletin: IContextBulletin | ISentContext): string[] {
  const lines: string[] = [];
  if (bulletin.notebook) {
    lines.push(
      bulletin.cell == null ? bulletin.notebook : `${bulletin.notebook}, cell ${bulletin.cell}`
    );
  }
  if (bulletin.directory != null) {
    lines.push(`folder ${bulletin.directory || '.'}`);
  }
  if (bulletin.branch) {
    const state =
      bulletin.dirty == null ? '' : bulletin.dirty ? ' (uncommitted changes)' : ' (clean)';
    lines.push(`git ${bulletin.branch}${state}`);
  }
  for (const error of bulletin.errors ?? []) {
    lines.push(`error ${error}`);
  }
  return lines;
}

/** Props of {@link ContextChip}. */
export interface IContextChipProps {
  bulletin: IContextBulletin;
  onRemove: () => void;
}

/** The chip: the facts on one line each, and × to leave them out of the next message. */
export function ContextChip({ bulletin, onRemove }: IContextChipProps): JSX.Element {
  const lines = bulletinLines(bulletin);
  return (
    <div
      className="betty-ContextChip"
      data-testid="betty-context-chip"
      title="Sent with your next message"
    >
      <ul className="betty-ContextChip-facts">
        {lines.map((line, index) => (
          <li key={index}>{visibleText(line)}</li>
        ))}
      </ul>
      <button
        className="betty-ContextChip-remove"
        data-testid="betty-context-chip-remove"
        aria-label="Send this message without the notebook's context"
        title="Send this message without the notebook's context"
        onClick={onRemove}
      >
        ×
      </button>
    </div>
  );
}

/** The chip as it went with a message already sent: the same facts, under the person's words. */
export function SentChip({ bulletin }: { bulletin: ISentContext }): JSX.Element | null {
  const lines = bulletinLines(bulletin);
  if (lines.length === 0) {
    return null;
  }
  return (
    <div
      className="betty-ContextChip betty-ContextChip-sent"
      data-testid="betty-message-context"
      title="Sent with this message"
    >
      <ul className="betty-ContextChip-facts">
        {lines.map((line, index) => (
          <li key={index}>{visibleText(line)}</li>
        ))}
      </ul>
    </div>
  );
}
