/**
 * The edit form of an approval card. A submission is edited as its script (in JupyterLab's
 * code editor) with fields for the resources its `#SBATCH` lines ask for; any other call as
 * one field per argument. Every change is sent to the server, which checks it with the same
 * code as the model's call and previews it again; "Approve edited" is possible only once the
 * preview of exactly this edit came back clean.
 */
import * as React from 'react';

import { IApprovalRequest, IPreview } from '../events';
import { editKey, EditingContext, IEditing, isScriptEdit, RECHECK_DELAY_MS } from '../editing';
import { visibleText } from '../safe';
import { IResources, Resource, RESOURCES, resourcesOf, withResource } from '../sbatch';
import { PreviewView } from './Preview';
import { ScriptEditor } from './ScriptEditor';

/** Props of {@link EditForm}. */
export interface IEditFormProps {
  request: IApprovalRequest;
  /** The card is sending an answer or expired: nothing can be approved now. */
  disabled: boolean;
  onApprove: (args: Record<string, unknown>) => void;
  onCancel: () => void;
}

/** The edit's fields as text, one per argument: a string as it is, anything else as JSON. */
export type ArgumentTexts = Record<string, string>;

/** Each argument as the form shows it. */
export function argumentTexts(args: Record<string, unknown>): ArgumentTexts {
  return Object.fromEntries(
    Object.entries(args).map(([name, value]) => [
      name,
      typeof value === 'string'
        ? value
        : value === null || value === undefined
          ? ''
          : JSON.stringify(value, null, 1)
    ])
  );
}

/**
 * The edited arguments from the form's texts (a string argument stays a string; any other is
 * read as JSON, '' as null), or a one-line message naming the argument that is not JSON.
 */
export function editedArguments(
  original: Record<string, unknown>,
  texts: ArgumentTexts
): Record<string, unknown> | string {
  const args: Record<string, unknown> = {};
  for (const [name, text] of Object.entries(texts)) {
    if (typeof original[name] === 'string') {
      args[name] = text;
      continue;
    }
    if (text.trim() === '') {
      args[name] = null;
      continue;
    }
    try {
      args[name] = JSON.parse(text);
    } catch (error) {
      return `${name}: not a JSON value (${(error as Error).message}); write a number, true/false, "text", [..] or {..}`;
    }
  }
  return args;
}

/** The submission's argument numbering its script's lines as the person saw them (2 under a cell magic). */
const SCRIPT_FIRST_LINE = 'first_line';

/** The arguments the form offers: an edited script is numbered by the form itself, so not `first_line`. */
function formArguments(request: IApprovalRequest, script: boolean): Record<string, unknown> {
  const { [SCRIPT_FIRST_LINE]: _numbering, ...rest } = request.args;
  return script ? rest : request.args;
}

/** An edited script's lines are numbered as the form shows them, from 1, whatever cell it came from. */
function numberedFromTheForm(
  request: IApprovalRequest,
  script: boolean,
  parsed: Record<string, unknown> | string
): Record<string, unknown> | string {
  if (typeof parsed === 'string' || !script || !(SCRIPT_FIRST_LINE in request.args)) {
    return parsed;
  }
  return { ...parsed, [SCRIPT_FIRST_LINE]: 1 };
}

/** The server's answer for one edit. */
interface ICheck {
  key: string;
  preview: IPreview | null;
  problem: string | null;
}

/** The edit form of one card. */
export function EditForm({ request, disabled, onApprove, onCancel }: IEditFormProps): JSX.Element {
  const editing = React.useContext(EditingContext);
  const script = isScriptEdit(request.tool, request.args);
  const [texts, setTexts] = React.useState<ArgumentTexts>(() => argumentTexts(formArguments(request, script)));
  const parsed = numberedFromTheForm(request, script, editedArguments(request.args, texts));
  const key = typeof parsed === 'string' ? null : editKey(parsed);
  const check = useCheck(editing, request.approval_id, parsed, key);
  const ready = key !== null && check?.key === key && check.preview !== null && !disabled;
  const set = (name: string, value: string) =>
    setTexts(previous => ({ ...previous, [name]: value }));
  const others = Object.keys(texts).filter(name => !(script && name === 'script'));

  const form = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    // Opened from the keyboard or by a click, the form takes focus (its fields come next on Tab),
    // not the page: the Edit button it replaces is gone.
    form.current?.focus();
  }, []);
  const escape = (event: React.KeyboardEvent) => {
    if (event.key === 'Escape' && !event.defaultPrevented) {
      event.preventDefault();
      event.stopPropagation();
      onCancel();
    }
  };

  return (
    <div
      className="betty-ApprovalCard-edit"
      data-testid="betty-edit-form"
      ref={form}
      tabIndex={-1}
      role="group"
      aria-label="Edit the request (Esc closes)"
      onKeyDown={escape}
    >
      {script && (
        <ScriptFields
          script={texts.script}
          cluster={clusterOf(request)}
          editing={editing}
          onChange={value => set('script', value)}
        />
      )}
      {others.length > 0 && (
        <ArgumentFields
          names={others}
          texts={texts}
          original={request.args}
          folded={script}
          onChange={set}
        />
      )}
      <EditStatus parsed={parsed} check={check} current={key} />
      {check?.preview && check.key === key && (
        <div className="betty-ApprovalCard-repreview" data-testid="betty-edit-preview">
          <PreviewView preview={check.preview} open={true} />
        </div>
      )}
      <div className="betty-ApprovalCard-buttons">
        <button
          className="betty-Button betty-Button-accept"
          data-testid="betty-edit-send"
          title={
            ready ? 'Approve the edited request as previewed' : 'Wait for the edit to be checked'
          }
          disabled={!ready}
          onClick={() => typeof parsed !== 'string' && onApprove(parsed)}
        >
          Approve edited
        </button>
        <button className="betty-Button" data-testid="betty-edit-cancel" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}

/** Ask the server about each edit once typing pauses; the answer of the newest edit wins. */
function useCheck(
  editing: IEditing | null,
  approvalId: string,
  parsed: Record<string, unknown> | string,
  key: string | null
): ICheck | null {
  const [check, setCheck] = React.useState<ICheck | null>(null);
  const latest = React.useRef<string | null>(null);
  latest.current = key;
  React.useEffect(() => {
    if (editing === null || key === null || typeof parsed === 'string') {
      return;
    }
    const timer = setTimeout(() => {
      editing.repreview(approvalId, parsed).then(
        preview => latest.current === key && setCheck({ key, preview, problem: null }),
        (error: Error) =>
          latest.current === key &&
          setCheck({ key, preview: null, problem: error.message ?? String(error) })
      );
    }, RECHECK_DELAY_MS);
    return () => clearTimeout(timer);
  }, [editing, approvalId, key]); // `parsed` is the same edit as long as `key` is
  return check;
}

function EditStatus(props: {
  parsed: Record<string, unknown> | string;
  check: ICheck | null;
  current: string | null;
}): JSX.Element {
  const { parsed, check, current } = props;
  let text: string;
  let state: string;
  if (typeof parsed === 'string') {
    [text, state] = [parsed, 'refused'];
  } else if (check === null || check.key !== current) {
    [text, state] = ['Checking the edit…', 'checking'];
  } else if (check.problem !== null) {
    [text, state] = [check.problem, 'refused'];
  } else {
    [text, state] = ['Checked: this is what will run if you approve.', 'ready'];
  }
  return (
    <div
      className={`betty-ApprovalCard-editStatus betty-ApprovalCard-editStatus-${state}`}
      data-testid="betty-edit-status"
      data-state={state}
      role={state === 'refused' ? 'alert' : 'status'}
    >
      {visibleText(text)}
    </div>
  );
}

function clusterOf(request: IApprovalRequest): string | null {
  const cluster = request.preview.details?.cluster;
  return typeof cluster === 'string' ? cluster : null;
}

interface IScriptFieldsProps {
  script: string;
  cluster: string | null;
  editing: IEditing | null;
  onChange: (script: string) => void;
}

/** The script and its resource fields: a field rewrites its `#SBATCH` line; editing the line updates the field. */
function ScriptFields({ script, cluster, editing, onChange }: IScriptFieldsProps): JSX.Element {
  const partitions = usePartitions(editing, cluster);
  const resources = resourcesOf(script);
  return (
    <>
      <div className="betty-ApprovalCard-resources" data-testid="betty-edit-resources">
        {RESOURCES.map(({ key, label, placeholder }) => (
          <label className="betty-ApprovalCard-resource" key={key}>
            <span>{label}</span>
            <ResourceInput
              resource={key}
              resources={resources}
              partitions={partitions}
              placeholder={placeholder}
              onChange={value => onChange(withResource(script, key, value))}
            />
          </label>
        ))}
      </div>
      <ScriptEditor
        value={script}
        onChange={onChange}
        editors={editing?.editors ?? null}
        label="Batch script"
      />
    </>
  );
}

function ResourceInput(props: {
  resource: Resource;
  resources: IResources;
  partitions: string[];
  placeholder: string;
  onChange: (value: string) => void;
}): JSX.Element {
  const { resource, resources, partitions, placeholder, onChange } = props;
  const value = resources[resource];
  if (resource === 'partition' && partitions.length > 0) {
    const choices = value && !partitions.includes(value) ? [...partitions, value] : partitions;
    return (
      <select
        className="betty-ApprovalCard-resourceInput"
        data-testid="betty-edit-partition"
        value={value}
        onChange={event => onChange(event.target.value)}
      >
        <option value="">(default)</option>
        {choices.map(name => (
          <option key={name} value={name}>
            {visibleText(name)}
          </option>
        ))}
      </select>
    );
  }
  return (
    <input
      className="betty-ApprovalCard-resourceInput"
      data-testid={`betty-edit-${resource}`}
      type={resource === 'gpus' ? 'number' : 'text'}
      min={resource === 'gpus' ? 0 : undefined}
      spellCheck={false}
      placeholder={placeholder}
      value={value}
      onChange={event => onChange(event.target.value)}
    />
  );
}

/** The partitions of `cluster` for a partition field ([] until read, or when they cannot be). */
export function usePartitions(editing: IEditing | null, cluster: string | null): string[] {
  const [partitions, setPartitions] = React.useState<string[]>([]);
  React.useEffect(() => {
    if (editing === null || cluster === null) {
      return;
    }
    let current = true;
    editing.partitions(cluster).then(
      names => current && setPartitions(names),
      () => undefined // the field stays free text
    );
    return () => {
      current = false;
    };
  }, [editing, cluster]);
  return partitions;
}

interface IArgumentFieldsProps {
  names: string[];
  texts: ArgumentTexts;
  original: Record<string, unknown>;
  /** Shown folded (a submission's arguments besides its script). */
  folded: boolean;
  onChange: (name: string, value: string) => void;
}

/** One field per argument: text as text (its lines as lines), anything else as JSON. */
function ArgumentFields({
  names,
  texts,
  original,
  folded,
  onChange
}: IArgumentFieldsProps): JSX.Element {
  const fields = names.map(name => {
    const text = texts[name];
    const json = typeof original[name] !== 'string';
    return (
      <label className="betty-ApprovalCard-argument" key={name}>
        <span className="betty-ApprovalCard-argumentName">
          {visibleText(name.replace(/_/g, ' '))}
          {json && <span className="betty-ApprovalCard-argumentKind"> (JSON)</span>}
        </span>
        <textarea
          className="betty-ApprovalCard-args"
          data-testid={`betty-edit-arg-${name}`}
          spellCheck={false}
          value={text}
          rows={Math.min(12, Math.max(1, text.split('\n').length))}
          onChange={event => onChange(name, event.target.value)}
        />
      </label>
    );
  });
  if (!folded) {
    return <div className="betty-ApprovalCard-arguments">{fields}</div>;
  }
  return (
    <details className="betty-ApprovalCard-arguments" data-testid="betty-edit-more">
      <summary>Goal and other arguments</summary>
      {fields}
    </details>
  );
}
