/**
 * The code the person is looking at: the active notebook cell or the open file, read from
 * JupyterLab's current widget by the shape of what it holds, so the panel needs neither
 * the notebook nor the file editor package.
 */

/** A piece of code and where it comes from. */
export interface ICodeSource {
  kind: 'cell' | 'file';
  /** The notebook's or the file's path. */
  path: string;
  text: string;
  /** A fence language (`python`, `bash`, …), '' when not known. */
  language: string;
}

/** Something with shared source text (a cell model, an editor model). */
interface ISourceModel {
  sharedModel: { getSource(): string };
  mimeType?: string;
  type?: string;
}

/** What the reader looks at in a document widget (a NotebookPanel, a file editor's widget). */
interface IDocumentLike {
  context?: { path?: string };
  content?: {
    activeCell?: { model?: ISourceModel } | null;
    model?: (ISourceModel & { defaultKernelLanguage?: string }) | null;
  };
}

/** The active cell of a notebook, or the whole text of a file editor; null otherwise. */
export function activeCode(widget: unknown): ICodeSource | null {
  const document = widget as IDocumentLike | null;
  const path = document?.context?.path ?? '';
  const content = document?.content;
  const cell = content?.activeCell?.model;
  if (cell && hasSource(cell)) {
    const language =
      cell.type === 'markdown' ? 'markdown' : (content?.model?.defaultKernelLanguage ?? 'python');
    return { kind: 'cell', path, text: cell.sharedModel.getSource(), language };
  }
  const model = content?.model;
  if (model && hasSource(model) && content?.activeCell === undefined) {
    return {
      kind: 'file',
      path,
      text: model.sharedModel.getSource(),
      language: fenceLanguage(path)
    };
  }
  return null;
}

/** The fence language for a file, from its extension. */
export function fenceLanguage(path: string): string {
  const extension = path.slice(path.lastIndexOf('.') + 1).toLowerCase();
  const languages: Record<string, string> = {
    py: 'python',
    sh: 'bash',
    sbatch: 'bash',
    slurm: 'bash',
    bash: 'bash',
    yaml: 'yaml',
    yml: 'yaml',
    json: 'json'
  };
  return languages[extension] ?? '';
}

function hasSource(model: unknown): model is ISourceModel {
  const shared = (model as ISourceModel | null)?.sharedModel;
  return typeof shared?.getSource === 'function';
}
