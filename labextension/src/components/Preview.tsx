/**
 * The exact preview of an approval: a command in monospace, a script highlighted, a diff
 * with its added and removed lines coloured, or plain text.
 */
import * as React from 'react';

import { IPreview } from '../events';
import { estimateWords, IEstimateWords } from '../format';
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
  // The newline that ends the last line starts no line of its own.
  const lines = preview.text.replace(/\n$/, '').split('\n');
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
  const estimate = estimateWords(details?.gpu_estimate);
  const entries = Object.entries(details ?? {}).filter(
    // The breakdown says what the one-line estimate says, and more.
    ([name]) => !(estimate && name === 'gpu_memory')
  );
  if (entries.length === 0) {
    return null;
  }
  return (
    <dl className="betty-Preview-details">
      {entries.map(([name, value]) => (
        <React.Fragment key={name}>
          <dt>{visibleText(name === 'gpu_estimate' ? 'GPU memory' : name.replace(/_/g, ' '))}</dt>
          <dd>
            {name === 'gpu_estimate' && estimate ? (
              <EstimateView estimate={estimate} />
            ) : typeof value === 'string' && value.includes('\n') ? (
              // Code or a table over several lines (a notebook's injected parameters cell): kept as lines.
              <pre className="betty-Preview-code betty-Preview-lines" data-testid="betty-preview-lines">
                {visibleText(value.replace(/\n$/, ''))}
              </pre>
            ) : (
              <LongText text={detailText(value)} />
            )}
          </dd>
        </React.Fragment>
      ))}
    </dl>
  );
}

function detailText(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (typeof value === 'boolean') {
    return value ? 'yes' : 'no';
  }
  return JSON.stringify(value);
}

/** Characters of a detail shown before it folds to its first lines, with a button to show it all. */
const FOLD_CHARS = 160;

/** A detail's text; a long one (a command with its environment, say) folded to its first lines. */
function LongText({ text }: { text: string }): JSX.Element {
  const [open, setOpen] = React.useState(false);
  if (text.length <= FOLD_CHARS) {
    return <Breakable text={text} />;
  }
  return (
    <>
      <div className={open ? undefined : 'betty-Preview-folded'} data-testid="betty-preview-long">
        <Breakable text={text} />
      </div>
      <button
        className="betty-Link betty-Preview-unfold"
        data-testid="betty-preview-unfold"
        aria-expanded={open}
        onClick={() => setOpen(!open)}
      >
        {open ? 'show less' : `show all ${text.length} characters`}
      </button>
    </>
  );
}

/** Text that may break after each `/`, so a long path wraps between its folders, not mid-name. */
function Breakable({ text }: { text: string }): JSX.Element {
  const pieces = visibleText(text).split(/(?<=\/)/);
  return (
    <>
      {pieces.map((piece, i) => (
        <React.Fragment key={i}>
          {piece}
          {i < pieces.length - 1 && <wbr />}
        </React.Fragment>
      ))}
    </>
  );
}

/** A GPU memory estimate on a submission's card: its peak, what it is for and its parts. */
function EstimateView({ estimate }: { estimate: IEstimateWords }): JSX.Element {
  return (
    <div className="betty-Estimate" data-testid="betty-gpu-estimate">
      <div className="betty-Estimate-peak">{visibleText(estimate.peak)}</div>
      {estimate.about && <div className="betty-Estimate-about">{visibleText(estimate.about)}</div>}
      {estimate.parts.length > 0 && (
        <table className="betty-Estimate-parts">
          <tbody>
            {estimate.parts.map(part => (
              <tr key={part.name}>
                <td>{visibleText(part.name)}</td>
                <td className="betty-Estimate-size">{part.size}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {estimate.notes.map((note, i) => (
        <div className="betty-Estimate-note" key={i}>
          {visibleText(note)}
        </div>
      ))}
    </div>
  );
}
