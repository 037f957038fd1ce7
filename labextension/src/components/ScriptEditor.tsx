/**
 * A batch script in JupyterLab's own code editor (CodeMirror, as in a notebook cell), or in
 * a plain text area where the panel has no editor services. The script is the parent's
 * state: typing calls `onChange`, and a new `value` from outside (a resource field) is
 * written into the editor.
 */
import * as React from 'react';

import type { CodeEditor } from '@jupyterlab/codeeditor';

import { IScriptEditors } from '../editing';

/** Props of {@link ScriptEditor}. */
export interface IScriptEditorProps {
  value: string;
  onChange: (value: string) => void;
  editors: IScriptEditors | null;
  label: string;
}

/** The script editor of an approval card. */
export function ScriptEditor({ value, onChange, editors, label }: IScriptEditorProps): JSX.Element {
  const host = React.useRef<HTMLDivElement>(null);
  const model = React.useRef<CodeEditor.IModel | null>(null);
  const changed = React.useRef(onChange);
  changed.current = onChange;
  const first = React.useRef(value);

  React.useEffect(() => {
    if (editors === null || host.current === null) {
      return;
    }
    const opened = new editors.Model();
    opened.mimeType = editors.mimeType;
    opened.sharedModel.setSource(first.current);
    const editor = editors.factory({
      host: host.current,
      model: opened,
      config: { lineNumbers: true, lineWrap: true }
    });
    const typed = () => changed.current(opened.sharedModel.getSource());
    opened.sharedModel.changed.connect(typed);
    model.current = opened;
    return () => {
      opened.sharedModel.changed.disconnect(typed);
      model.current = null;
      editor.dispose();
      opened.dispose();
    };
  }, [editors]);

  React.useEffect(() => {
    const shown = model.current;
    if (shown !== null && shown.sharedModel.getSource() !== value) {
      shown.sharedModel.setSource(value);
    }
  }, [value]);

  if (editors === null) {
    return (
      <textarea
        className="betty-ApprovalCard-args betty-ScriptEditor-plain"
        data-testid="betty-edit-script"
        aria-label={label}
        spellCheck={false}
        value={value}
        rows={Math.min(20, Math.max(6, value.split('\n').length + 1))}
        onChange={event => onChange(event.target.value)}
      />
    );
  }
  return (
    <div
      className="betty-ScriptEditor"
      data-testid="betty-edit-script"
      aria-label={label}
      ref={host}
    />
  );
}
