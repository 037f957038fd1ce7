/**
 * What the commands send: the active cell or file, fenced, and the settings they read.
 */
import { panelSettings } from '../src/model';
import { askAboutCellPrompt, fenced, sizeGpusPrompt, submitScriptPrompt } from '../src/prompts';
import { activeCode } from '../src/selection';

const source = (text: string) => ({ sharedModel: { getSource: () => text } });

describe('activeCode', () => {
  it('reads the active cell of a notebook with the kernel language', () => {
    const notebook = {
      context: { path: 'analysis.ipynb' },
      content: {
        activeCell: { model: { ...source('import torch'), type: 'code' } },
        model: { ...source('{}'), defaultKernelLanguage: 'python' }
      }
    };
    expect(activeCode(notebook)).toEqual({
      kind: 'cell',
      path: 'analysis.ipynb',
      text: 'import torch',
      language: 'python'
    });
  });

  it('reads the whole text of a file editor', () => {
    const editor = {
      context: { path: 'jobs/train.sbatch' },
      content: { model: source('#!/bin/bash') }
    };
    expect(activeCode(editor)).toEqual({
      kind: 'file',
      path: 'jobs/train.sbatch',
      text: '#!/bin/bash',
      language: 'bash'
    });
  });

  it.each([
    ['nothing', null],
    ['a launcher', { content: {} }],
    ['a notebook with no active cell', { content: { activeCell: null, model: source('{}') } }]
  ])('%s has no code', (_name, widget) => {
    expect(activeCode(widget)).toBeNull();
  });
});

describe('prompts', () => {
  it('fences code with a fence its own backticks cannot close', () => {
    const code = 'print("```")';
    const text = fenced(code, 'python');
    expect(text).toBe('````python\nprint("```")\n````');
  });

  it('cuts very long code and says so', () => {
    const text = fenced('x'.repeat(60_000));
    expect(text).toMatch(/cut after 50000 characters/);
    expect(text.length).toBeLessThan(50_100);
  });

  it('each command says what to do and carries the code and its path', () => {
    const cell = askAboutCellPrompt('x = 1', 'a.ipynb');
    expect(cell).toContain('`a.ipynb`');
    expect(cell).toContain('```python\nx = 1\n```');
    expect(sizeGpusPrompt('model = "llama"', 'train.py', 'python')).toMatch(/gpu_estimate/);
    const submit = submitScriptPrompt('#!/bin/bash\n#SBATCH -p gpu\n', 'jobs/a.sbatch');
    expect(submit).toMatch(/cluster_submit/);
    expect(submit).toContain('```bash\n#!/bin/bash\n#SBATCH -p gpu\n```');
  });
});

describe('panelSettings', () => {
  it('takes valid values and leaves odd ones to the defaults', () => {
    expect(panelSettings({ jobsRefreshSeconds: 30, defaultMode: 'auto' })).toEqual({
      jobsRefreshSeconds: 30,
      defaultMode: 'auto'
    });
    expect(panelSettings({ jobsRefreshSeconds: 2, defaultMode: 'yolo' })).toEqual({});
  });
});
