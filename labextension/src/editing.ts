/**
 * What an approval card needs to let a person edit the request: the server that checks and
 * previews an edit again, the cluster's partitions for the partition field, JupyterLab's
 * code editor for a script, and which cards open in the editor at once (a Resubmit…).
 * The side panel provides it once (`BettyApp`); a card without it offers no Edit, since an
 * edit nobody can check may not be approved.
 */
import * as React from 'react';

import type { CodeEditor } from '@jupyterlab/codeeditor';

import { IApprovalRequest, IPreview } from './events';

/** JupyterLab's editor factory and model class (from `IEditorServices`), or null for a plain text area. */
export interface IScriptEditors {
  factory: CodeEditor.Factory;
  /** `CodeEditor.Model`: passed in so the panel's modules load without the editor's package. */
  Model: new () => CodeEditor.IModel;
  /** The MIME type of a shell script in this JupyterLab (`text/x-sh`). */
  mimeType: string;
}

/** The edit services of a side panel. */
export interface IEditing {
  /** The edit's preview, checked by the same code as the model's call; rejects with the one-line reason. */
  repreview(approvalId: string, args: Record<string, unknown>): Promise<IPreview>;
  /** The partitions of `cluster` the partition field offers ([] when they cannot be read). */
  partitions(cluster: string): Promise<string[]>;
  /** JupyterLab's code editor, or null where there is none (a plain text area stands in). */
  editors: IScriptEditors | null;
  /** Whether this card opens in the editor at once (the person asked for it with Resubmit…). */
  opensEditing(request: IApprovalRequest): boolean;
  /**
   * When and where open submission card `approvalId`'s job would start, one line (`''` for other
   * cards); asked once the card is shown, so the card never waits for it.
   */
  startEstimate?(approvalId: string): Promise<string>;
}

/** The panel's edit services; null where nothing can check an edit. */
export const EditingContext = React.createContext<IEditing | null>(null);

/** How long a pause in typing lasts before the edit is checked again (ms). */
export const RECHECK_DELAY_MS = 400;

/** A stable key of an edit's arguments: a preview answers for the edit it was asked for only. */
export function editKey(args: Record<string, unknown>): string {
  return JSON.stringify(args);
}

/** Whether `args` is a submission whose script the card edits with its resource fields. */
export function isScriptEdit(tool: string, args: Record<string, unknown>): boolean {
  return tool === 'cluster_submit' && typeof args.script === 'string';
}
