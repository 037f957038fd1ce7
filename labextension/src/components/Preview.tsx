/**
 * The exact preview of an approval: a command in monospace, a script highlighted, a diff
 * with its added and removed lines coloured, or plain text.
 */
import * as React from 'react';

import { IPreview } from '../events';
import { diffLineKind, highlightShellLine } from '../highlight';
import { visibleText } from '../safe';

/** Props of {@link PreviewView}. */
export interface IPreviewProps {
  preview: IPreview;
}

/** The preview of one approval, as the person approves it. */
export function PreviewView({ preview }: IPreviewProps): JSX.Element {
  return (
    <div className="betty-Preview" data-testid="betty-preview" data-kind={preview.kind}>
      {preview.title && <div className="betty-Preview-title">{visibleText(preview.title)}</div>}
      <PreviewBody preview={preview} />
      <PreviewDetails details={preview.details} />
    </div>
  );
}

function PreviewBody({ preview }: IPreviewProps): JSX.Element {
  const lines = preview.text.split('\n');
  switch (preview.kind) {
    case 'command':
      return (
        <pre className="betty-Preview-code betty-Preview-command">
          <code>{visibleText(preview.text)}</code>
        </pre>
      );
    case 'script':
      return (
        <pre className="betty-Preview-code betty-Preview-script">
          {lines.map((line, i) => (
            <div className="betty-Preview-line" key={i}>
              {highlightShellLine(line).map((token, j) => (
                <span key={j} className={token.kind ? `betty-hl-${token.kind}` : undefined}>
                  {visibleText(token.text)}
                </span>
              ))}
              {line === '' ? '\n' : null}
            </div>
          ))}
        </pre>
      );
    case 'diff':
      return (
        <pre className="betty-Preview-code betty-Preview-diff">
          {lines.map((line, i) => (
            <div className={`betty-Preview-line betty-diff-${diffLineKind(line)}`} key={i}>
              {line === '' ? '\n' : visibleText(line)}
            </div>
          ))}
        </pre>
      );
    default:
      return <pre className="betty-Preview-text">{visibleText(preview.text)}</pre>;
  }
}

function PreviewDetails({ details }: { details?: Record<string, unknown> }): JSX.Element | null {
  const entries = Object.entries(details ?? {});
  if (entries.length === 0) {
    return null;
  }
  return (
    <dl className="betty-Preview-details">
      {entries.map(([name, value]) => (
        <React.Fragment key={name}>
          <dt>{name.replace(/_/g, ' ')}</dt>
          <dd>{visibleText(typeof value === 'string' ? value : JSON.stringify(value))}</dd>
        </React.Fragment>
      ))}
    </dl>
  );
}
