/**
 * Approved cell changes for a notebook open here, applied to the open document (the server
 * hands them over with its answer to the panel's word about the open notebooks). The document
 * is the person's: a replaced cell is replaced only while it still holds what the person was
 * shown (and is of the same type), otherwise the new source goes into a new cell beside it, so
 * nothing they typed is lost; a cell runs only while its source has the approved digest (the
 * sha256 its card showed), checked at the moment it runs. The person's next save writes the
 * change with their own edits.
 */
import { ICellChangeJson } from './contract/serverApi';
import { sha256Hex } from './digest';

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
          type: string;
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
    if (held !== null && held === change.before && cells.get(change.index).type === change.cell_type) {
      cells.get(change.index).sharedModel.setSource(change.source);
      return 'replaced';
    }
    model.sharedModel.insertCell(Math.min(change.index + 1, cells.length), {
      cell_type: change.cell_type,
      source: change.source
    });
    return 'inserted beside: the cell changed since';
  }
  const refused = notRunnable(held, change);
  if (refused !== null) {
    return refused;
  }
  // Nothing awaits between the check and the run: the cell run is the cell checked.
  tab.content.deselectAll?.();
  tab.content.activeCellIndex = change.index;
  await run();
  return 'ran';
}

/** Why cell `change.index`, holding `held` (null: no such cell), must not run for `change`; null when it may. */
function notRunnable(held: string | null, change: ICellChangeJson): string | null {
  if (!change.sha256 || !/^[0-9a-f]{64}$/.test(change.sha256)) {
    return `not run: cell ${change.index} came without the digest of approved code`;
  }
  if (held === null || sha256Hex(held) !== change.sha256) {
    const why = "the open cell is not the card's: save it, then ask again";
    return `not run: cell ${change.index} no longer holds the approved code (${why})`;
  }
  return null;
}
