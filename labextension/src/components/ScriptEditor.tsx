/**
 * A batch script in JupyterLab's own code editor (CodeMirror, as in a notebook cell), or in
 * a plain text area where the panel has no editor services. The script is the parent's
 * state: typing calls `onChange`, and a new `value` from outside (a resource field) is
 * written into the editor.
 *
 * Tab indents where the caret is (a selection becomes the indentation); Shift+Tab leaves the
 * script for the field before it, as anywhere else on the page.
 */
import * as React from 'react';

import type { CodeEditor } from '@jupyterlab/codeeditor';

import { IScriptEditors } from '../editing';

/** What Tab inserts in a script. */
export const INDENT = '  ';

/**
 * What a Tab key press in a script does: `'indent'` at the caret, `'leave'` the script (Shift+Tab,
 * the browser moves focus), or nothing of the script's own (a Tab with Ctrl, Alt or Meta).
 */
export function tabAction(event: KeyboardEvent | React.KeyboardEvent): 'indent' | 'leave' | null {
  if (event.key !== 'Tab' || event.altKey || event.ctrlKey || event.metaKey) {
    return null;
  }
  return event.shiftKey ? 'leave' : 'indent';
}

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
    // Before the editor's own keymap (which indents the whole line and keeps focus in the script).
    const tab = (event: KeyboardEvent) => {
      const action = tabAction(event);
      if (action === null) {
        return;
      }
      event.stopPropagation();
      if (action === 'indent') {
        event.preventDefault();
        const { start, end } = editor.getSelection();
        const [from, to] = [editor.getOffsetAt(start), editor.getOffsetAt(end)].sort((a, b) => a - b);
        opened.sharedModel.updateSource(from, to, INDENT);
        const caret = editor.getPositionAt(from + INDENT.length);
        if (caret) {
          editor.setCursorPosition(caret);
        }
      }
    };
    const node = host.current;
    node.addEventListener('keydown', tab, true);
    return () => {
      node.removeEventListener('keydown', tab, true);
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
        onKeyDown={event => {
          if (tabAction(event) !== 'indent') {
            return;
          }
          event.preventDefault();
          const area = event.currentTarget;
          const [from, to] = [area.selectionStart, area.selectionEnd];
          onChange(area.value.slice(0, from) + INDENT + area.value.slice(to));
          requestAnimationFrame(() => area.setSelectionRange(from + INDENT.length, from + INDENT.length));
        }}
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
