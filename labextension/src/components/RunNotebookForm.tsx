/**
 * "Run on cluster" for the open notebook: partition, time, GPUs, environment and parameters
 * (`name=value`, one a line). Starting it puts `notebook_submit`'s card in the chat, showing the
 * generated script and the exact cell of parameters; nothing is submitted until it is approved.
 * A notebook with unsaved changes is not sent: the cluster runs the file as saved. The environment
 * is one of the cluster profile's (the first by default), or the node's own `python3`. What was
 * typed is kept for each notebook while the panel is open: a run the tool refused is asked again
 * with one change, not typed again.
 */
import * as React from 'react';

import { EditingContext } from '../editing';
import { NotebookContext } from '../notebookContext';
import { firstRun, IRunTexts, runArguments } from '../runNotebook';
import { visibleText } from '../safe';
import { useBulletin } from './ContextChip';
import { usePartitions } from './EditForm';

/** Props of {@link RunNotebookForm}. */
export interface IRunNotebookFormProps {
  /** The notebook's path in the project. */
  notebook: string;
  /** The chat session's cluster (its partitions are offered). */
  cluster: string | null;
  /** The cluster profile's named environments (none: only the node's `python3`). */
  environments?: string[];
  /** What was typed when the form was last closed (default: {@link firstRun}). */
  kept?: IRunTexts;
  /** Called with the texts whenever they change, to keep them. */
  onTexts?: (texts: IRunTexts) => void;
  /** Whether the open notebook has changes not yet saved. */
  unsaved: () => boolean;
  /** Start `notebook_submit` with `args` in the chat; rejects with the reason. */
  onStart: (args: Record<string, unknown>) => Promise<void>;
  onClose: () => void;
}

/** The form; the texts stay as typed whatever goes wrong. */
export function RunNotebookForm(props: IRunNotebookFormProps): JSX.Element {
  const partitions = usePartitions(React.useContext(EditingContext), props.cluster);
  const environments = props.environments ?? [];
  const [texts, setTexts] = React.useState<IRunTexts>(props.kept ?? firstRun(environments));
  const [error, setError] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);
  const onTexts = props.onTexts;
  React.useEffect(() => {
    onTexts?.(texts);
  }, [texts, onTexts]);
  const set =
    (name: keyof IRunTexts) =>
    (event: React.ChangeEvent<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>) =>
      setTexts(previous => ({ ...previous, [name]: event.target.value }));
  const partition = texts.partition || partitions[0] || '';

  const start = async () => {
    if (props.unsaved()) {
      setError(`Save ${props.notebook} first: the cluster runs the notebook as saved.`);
      return;
    }
    const checked = runArguments(props.notebook, { ...texts, partition });
    if ('error' in checked) {
      setError(checked.error);
      return;
    }
    setError(null);
    setBusy(true);
    try {
      await props.onStart(checked.args);
      props.onClose();
    } catch (reason) {
      setError((reason as Error).message ?? String(reason));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="betty-RunNotebook" data-testid="betty-run-notebook-form">
      <div className="betty-RunNotebook-title">
        Run {visibleText(props.notebook)} on the cluster
      </div>
      <label>
        Partition
        {partitions.length > 0 ? (
          <select data-testid="betty-run-partition" value={partition} onChange={set('partition')}>
            {partitions.map(name => (
              <option key={name} value={name}>
                {visibleText(name)}
              </option>
            ))}
          </select>
        ) : (
          <input
            data-testid="betty-run-partition"
            value={texts.partition}
            onChange={set('partition')}
          />
        )}
      </label>
      <label>
        Time (minutes)
        <input
          data-testid="betty-run-time"
          type="number"
          min={1}
          value={texts.time}
          onChange={set('time')}
        />
      </label>
      <label>
        GPUs
        <input
          data-testid="betty-run-gpus"
          type="number"
          min={0}
          value={texts.gpus}
          onChange={set('gpus')}
        />
      </label>
      <label>
        Environment
        <select
          data-testid="betty-run-env"
          title="Where the notebook runs: the cluster profile's environments (it needs nbclient and ipykernel)"
          value={texts.env}
          onChange={set('env')}
        >
          {environments.map(name => (
            <option key={name} value={name}>
              {visibleText(name)}
            </option>
          ))}
          {texts.env !== '' && !environments.includes(texts.env) && (
            <option value={texts.env}>{visibleText(texts.env)}</option>
          )}
          <option value="">the node&apos;s python3</option>
        </select>
      </label>
      <label>
        Parameters (name=value, one a line)
        <textarea
          data-testid="betty-run-params"
          rows={3}
          spellCheck={false}
          placeholder={'lr=3e-4\nepochs=10'}
          value={texts.params}
          onChange={set('params')}
        />
      </label>
      {error && (
        <div className="betty-Composer-error" role="alert" data-testid="betty-run-error">
          {visibleText(error)}
        </div>
      )}
      <div className="betty-Composer-buttons">
        <button
          className="betty-Button betty-Button-accept"
          data-testid="betty-run-start"
          disabled={busy}
          title="Shows the script and the parameters cell in the chat for your approval"
          onClick={() => void start()}
        >
          Ask to run
        </button>
        <button className="betty-Button" data-testid="betty-run-close" onClick={props.onClose}>
          Close
        </button>
      </div>
    </div>
  );
}

/** How the chat starts a notebook run: the session's cluster, the open notebook's state, the start. */
export interface IRunNotebookHooks {
  cluster: string | null;
  /** The cluster profile's named environments. */
  environments?: string[];
  unsaved: () => boolean;
  start: (args: Record<string, unknown>) => Promise<void>;
}

/** "Run on cluster…" for the notebook the context chip names, and its form once asked for. */
export function RunOnCluster({
  context,
  hooks
}: {
  context: NotebookContext | null;
  hooks: IRunNotebookHooks;
}): JSX.Element | null {
  const notebook = useBulletin(context)?.notebook ?? null;
  const [open, setOpen] = React.useState<string | null>(null);
  // What was typed for each notebook (and cluster), kept when the form closes.
  const kept = React.useRef(new Map<string, IRunTexts>());
  const where = `${hooks.cluster ?? ''}\n${open ?? ''}`;
  const keep = React.useCallback(
    (texts: IRunTexts) => {
      kept.current.set(where, texts);
    },
    [where]
  );
  if (open !== null) {
    return (
      <RunNotebookForm
        key={where}
        notebook={open}
        cluster={hooks.cluster}
        environments={hooks.environments}
        kept={kept.current.get(where)}
        onTexts={keep}
        unsaved={hooks.unsaved}
        onStart={hooks.start}
        onClose={() => setOpen(null)}
      />
    );
  }
  if (!notebook) {
    return null;
  }
  return (
    <div className="betty-RunNotebook-open">
      <button
        className="betty-Button"
        data-testid="betty-run-notebook"
        title={`Run ${visibleText(notebook)} as a job, its parameters injected (you approve the card first)`}
        onClick={() => setOpen(notebook)}
      >
        Run on cluster…
      </button>
    </div>
  );
}
