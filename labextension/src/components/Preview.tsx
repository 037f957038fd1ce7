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
  /** Show the exact text and details unfolded (a checked edit, whose script the person just wrote). */
  open?: boolean;
}

/** What the disclosure of a preview's exact text is called, by the preview's kind. */
const EXACT_WORDS: Record<IPreview['kind'], string> = {
  command: 'Exact command and details',
  script: 'Exact script, command, environment and paths',
  diff: 'Exact change and details',
  text: 'Full text and details'
};

/**
 * The preview of one approval, as the person approves it: first what they decide on (its
 * summary, at most three lines), then the exact text and every detail one click away.
 */
export function PreviewView({ preview, open = false }: IPreviewProps): JSX.Element {
  const summary = preview.summary?.length ? preview.summary : preview.title ? [preview.title] : [];
  return (
    <div className="betty-Preview" data-testid="betty-preview" data-kind={preview.kind}>
      <div className="betty-Preview-summary" data-testid="betty-preview-summary">
        {summary.map((line, i) => (
          <div className={i === 0 ? 'betty-Preview-title' : 'betty-Preview-summaryLine'} key={i}>
            {visibleText(line)}
          </div>
        ))}
      </div>
      <details className="betty-Preview-exact" data-testid="betty-preview-exact" open={open}>
        <summary>{EXACT_WORDS[preview.kind] ?? EXACT_WORDS.text}</summary>
        <PreviewBody preview={preview} />
        <PreviewFacts preview={preview} />
      </details>
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

/** The details in words (the server's facts), and a GPU estimate as its breakdown. */
function PreviewFacts({ preview }: IPreviewProps): JSX.Element | null {
  const estimate = estimateWords(preview.details?.gpu_estimate);
  // The breakdown says what the one-line estimate says, and more.
  const facts = (preview.facts ?? []).filter(fact => !(estimate && fact.label === 'GPU memory'));
  if (facts.length === 0 && !estimate) {
    return null;
  }
  return (
    <dl className="betty-Preview-details">
      {estimate && (
        <>
          <dt>GPU memory</dt>
          <dd>
            <EstimateView estimate={estimate} />
          </dd>
        </>
      )}
      {facts.map((fact, i) => (
        <React.Fragment key={i}>
          <dt>{visibleText(fact.label)}</dt>
          <dd>
            {fact.table ? (
              <FactTable rows={fact.table} />
            ) : fact.text.includes('\n') ? (
              // Code or a list over several lines (a notebook's injected parameters cell): kept as lines.
              <pre className="betty-Preview-code betty-Preview-lines" data-testid="betty-preview-lines">
                {visibleText(fact.text.replace(/\n$/, ''))}
              </pre>
            ) : (
              <LongText text={fact.text} />
            )}
          </dd>
        </React.Fragment>
      ))}
    </dl>
  );
}

/** A detail that is a table (a sweep's tasks and their parameters): its first row is the header. */
function FactTable({ rows }: { rows: string[][] }): JSX.Element {
  const [head, ...body] = rows;
  return (
    <table className="betty-Preview-table" data-testid="betty-preview-table">
      <thead>
        <tr>
          {(head ?? []).map((cell, i) => (
            <th key={i}>{visibleText(cell)}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {body.map((row, i) => (
          <tr key={i}>
            {row.map((cell, j) => (
              <td key={j}>{visibleText(cell)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
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
