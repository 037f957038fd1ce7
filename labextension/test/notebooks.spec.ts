import { INotebookStatus } from '../src/models';
import { INotebookCells, IOutput, openNotebooks, putStatus, showsState } from '../src/notebooks';

const ended: INotebookStatus = {
  path: 'notebooks/experiments/2026-11-25-lora.ipynb',
  job_id: '42',
  cluster: 'dev',
  state: 'COMPLETED',
  status: 'job 42 on dev: COMPLETED · exit code 0:0'
};

/** A cell as JupyterLab's model has it: its type, its metadata, and (code cells) its output model. */
class Cell {
  constructor(
    readonly type: string,
    readonly source: string,
    private readonly metadata: Record<string, unknown> = {},
    readonly kept: IOutput[] = []
  ) {}

  getMetadata(key: string): unknown {
    return this.metadata[key];
  }

  readonly outputs =
    this.type === 'code'
      ? {
          get length() {
            return this.kept.length;
          },
          kept: this.kept,
          get: (index: number) => ({ toJSON: () => this.kept[index] }),
          clear: () => void this.kept.splice(0),
          add: (output: IOutput) => this.kept.push(output)
        }
      : undefined;
}

function experimentNotebook(): { notebook: INotebookCells; cells: Cell[] } {
  const running: IOutput = { output_type: 'stream', name: 'stdout', text: 'job 42 on dev: RUNNING\n' };
  const cells = [
    new Cell('markdown', '# my notes, edited'),
    new Cell('code', 'status(42)', { tags: ['betty-status'] }, [{ ...running }]),
    new Cell('code', 'print("mine")', {}, [{ ...running }])
  ];
  return { notebook: { cells: { length: cells.length, get: (i: number) => cells[i] } }, cells };
}

describe('putStatus', () => {
  it("writes Betty's line into the status cell only, leaving the person's cells as they are", () => {
    const { notebook, cells } = experimentNotebook();
    expect(putStatus(notebook, ended)).toBe(true);
    expect(cells[1].kept).toEqual([{ output_type: 'stream', name: 'stdout', text: `${ended.status}\n` }]);
    expect(cells[2].kept[0].text).toBe('job 42 on dev: RUNNING\n');
    expect(cells[0].source).toBe('# my notes, edited');
    expect(putStatus(notebook, ended)).toBe(false);
  });

  it("keeps the output of the person's own run when it already says the state", () => {
    const { notebook, cells } = experimentNotebook();
    const run = 'job 42 (lora: RUNNING) on dev: COMPLETED — exit code 0:0, elapsed 0:00:03\n';
    cells[1].kept.splice(0, 1, { output_type: 'stream', name: 'stdout', text: run });
    expect(showsState(cells[1].kept, ended)).toBe(true);
    expect(putStatus(notebook, ended)).toBe(false);
    expect(cells[1].kept[0].text).toBe(run);
  });

  it("does not take another job's line for this one's", () => {
    const other: IOutput = { output_type: 'stream', name: 'stdout', text: ['job 421 on dev: ', 'COMPLETED\n'] };
    expect(showsState([other], ended)).toBe(false);
    expect(showsState([], ended)).toBe(false);
  });
});

describe('openNotebooks', () => {
  it('lists the notebook tabs, with no document until it has loaded', () => {
    const { notebook } = experimentNotebook();
    const model = { ...notebook, dirty: false };
    const tabs = [
      { context: { path: 'a.ipynb', isReady: true, model } },
      { context: { path: 'b.ipynb', isReady: false, model: { dirty: false } } },
      { context: { path: 'notes.md', isReady: true, model: { dirty: false } } },
      { title: 'the launcher' }
    ];
    const open = openNotebooks(tabs as any);
    expect(open.map(n => [n.path, n.notebook !== null])).toEqual([
      ['a.ipynb', true],
      ['b.ipynb', false]
    ]);
    open[0].markChanged();
    expect(model.dirty).toBe(true);
  });

  it("loads a notebook again only when its file changed after the tab read it, and never over the person's edits", async () => {
    let reverted = 0;
    const model = { dirty: false, cells: { length: 0, get: () => null } };
    const context = {
      path: 'a.ipynb',
      isReady: true,
      model,
      contentsModel: { last_modified: '2026-11-25T10:00:00Z' },
      revert: async () => void reverted++
    };
    const disk = { last_modified: '2026-11-25T10:00:00Z' };
    const contents = { get: async () => disk } as any;
    const [tab] = openNotebooks([{ context }] as any);
    await tab.reloadIfChanged(contents);
    expect(reverted).toBe(0);
    disk.last_modified = '2026-11-25T10:00:01Z';
    model.dirty = true;
    await tab.reloadIfChanged(contents);
    expect(reverted).toBe(0);
    model.dirty = false;
    await tab.reloadIfChanged(contents);
    expect(reverted).toBe(1);
  });
});
