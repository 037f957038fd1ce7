/**
 * Approved cell changes for a notebook open here, applied to the open document (the server
 * hands them over with its answer to the panel's word about the open notebooks). The document
 * is the person's: a replaced cell is replaced only while it still holds what the person was
 * shown, otherwise the new source goes into a new cell beside it, so nothing they typed is
 * lost; a cell runs only while it holds exactly the approved code. The person's next save
 * writes the change with their own edits.
 */
import { ICellChangeJson } from './contract/serverApi';

/** What a change uses of JupyterLab's `NotebookPanel`. */
export interface IChangeableTab {
  content: {
    activeCellIndex: number;
    deselectAll?: () => void;
    model: {
      sharedModel: {
        insertCell(index: number, cell: { cell_type: string; source: string }): unknown;
      };
      cells: {
        length: number;
        get(index: number): {
          sharedModel: { getSource(): string; setSource(text: string): void };
        };
      };
    } | null;
  };
}

/** How a change went, in one line for the person (the browser's console) and the test. */
export type ChangeResult =
  'inserted' | 'replaced' | 'inserted beside: the cell changed since' | 'ran' | string;

/**
 * Apply `change` to the open notebook `tab`; `run` runs its active cell in its kernel
 * (JupyterLab's `notebook:run-cell` on that tab). Returns what happened.
 */
export async function applyChange(
  tab: IChangeableTab,
  change: ICellChangeJson,
  run: () => Promise<unknown>
): Promise<ChangeResult> {
  const model = tab.content.model;
  if (model === null) {
    return 'not applied: the notebook is still loading';
  }
  const cells = model.cells;
  const held = change.index < cells.length ? cells.get(change.index).sharedModel.getSource() : null;
  if (change.action === 'insert') {
    model.sharedModel.insertCell(Math.min(change.index, cells.length), {
      cell_type: change.cell_type,
      source: change.source
    });
    return 'inserted';
  }
  if (change.action === 'replace') {
    if (held !== null && held === change.before) {
      cells.get(change.index).sharedModel.setSource(change.source);
      return 'replaced';
    }
    model.sharedModel.insertCell(Math.min(change.index + 1, cells.length), {
      cell_type: change.cell_type,
      source: change.source
    });
    return 'inserted beside: the cell changed since';
  }
  if (held === null || held !== change.source) {
    return `not run: cell ${change.index} no longer holds the approved code`;
  }
  tab.content.deselectAll?.();
  tab.content.activeCellIndex = change.index;
  await run();
  return 'ran';
}
