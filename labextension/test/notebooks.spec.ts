import { YNotebook } from '@jupyter/ydoc';

import { INotebookStatus } from '../src/models';
import { openNotebooks, putStatus, showsState } from '../src/notebooks';

const ended: INotebookStatus = {
  path: 'notebooks/experiments/2026-11-25-lora.ipynb',
  job_id: '42',
  cluster: 'dev',
  state: 'COMPLETED',
  status: 'job 42 on dev: COMPLETED · exit code 0:0'
};

function experimentNotebook(): YNotebook {
  const notebook = YNotebook.create({});
  notebook.insertCells(0, [
    { cell_type: 'markdown', source: '# my notes, edited' },
    {
      cell_type: 'code',
      source: 'status(42)',
      metadata: { tags: ['betty-status'] },
      outputs: [{ output_type: 'stream', name: 'stdout', text: 'job 42 on dev: RUNNING\n' }]
    },
    {
      cell_type: 'code',
      source: 'print("mine")',
      outputs: [{ output_type: 'stream', name: 'stdout', text: 'job 42 on dev: RUNNING\n' }]
    }
  ]);
  return notebook;
}

describe('putStatus', () => {
  it("writes Betty's line into the status cell only, leaving the person's cells as they are", () => {
    const notebook = experimentNotebook();
    expect(putStatus(notebook, ended)).toBe(true);
    const [notes, status, mine] = notebook.cells;
    expect(notes.getSource()).toBe('# my notes, edited');
    expect((status as any).getOutputs()).toEqual([
      { output_type: 'stream', name: 'stdout', text: `${ended.status}\n` }
    ]);
    expect((mine as any).getOutputs()[0].text).toBe('job 42 on dev: RUNNING\n');
    expect(putStatus(notebook, ended)).toBe(false);
  });

  it("keeps the output of the person's own run when it already says the state", () => {
    const notebook = experimentNotebook();
    const status = notebook.cells[1] as any;
    const run = 'job 42 (lora: RUNNING) on dev: COMPLETED — exit code 0:0, elapsed 0:00:03\n';
    status.setOutputs([{ output_type: 'stream', name: 'stdout', text: run }]);
    expect(showsState(status, ended)).toBe(true);
    expect(putStatus(notebook, ended)).toBe(false);
    expect(status.getOutputs()[0].text).toBe(run);
  });

  it("does not take another job's line for this one's", () => {
    const notebook = experimentNotebook();
    const status = notebook.cells[1] as any;
    status.setOutputs([{ output_type: 'stream', name: 'stdout', text: 'job 421 on dev: COMPLETED\n' }]);
    expect(showsState(status, ended)).toBe(false);
  });
});

describe('openNotebooks', () => {
  it('lists the notebook tabs, with no document until it has loaded', () => {
    const loaded = experimentNotebook();
    const tabs = [
      { context: { path: 'a.ipynb', isReady: true, model: { sharedModel: loaded, dirty: false } } },
      { context: { path: 'b.ipynb', isReady: false, model: { sharedModel: null, dirty: false } } },
      { context: { path: 'notes.md', isReady: true, model: { sharedModel: null, dirty: false } } },
      { title: 'the launcher' }
    ];
    const open = openNotebooks(tabs as any);
    expect(open.map(n => [n.path, n.notebook !== null])).toEqual([
      ['a.ipynb', true],
      ['b.ipynb', false]
    ]);
    open[0].markChanged();
    expect(tabs[0].context!.model.dirty).toBe(true);
  });
});
