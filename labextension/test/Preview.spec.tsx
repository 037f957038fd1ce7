import * as React from 'react';

import { IFact } from '../src/contract/events';
import { PreviewView } from '../src/components/Preview';
import { allByTestId, byTestId, click, render } from './render';

const ESTIMATE = {
  model: 'Llama-3.1-8B',
  method: 'lora',
  precision: 'bf16-mixed',
  gpus: 1,
  peak_gib: 73.111,
  breakdown: { weights: 14.983, gradients: 0, activations: 50.977, runtime: 7.101 },
  peak_moment: 'start of the backward pass',
  notes: []
};

/** A preview as the server sends it: its details, and the same details in words (its facts). */
function preview(details: Record<string, unknown>, facts: IFact[] = []): HTMLElement {
  const { container } = render(
    <PreviewView preview={{ kind: 'script', title: 'submit', text: '#!/bin/bash', details, facts }} />
  );
  return container;
}

function fact(label: string, text: string): IFact {
  return { label, text, table: null };
}

describe('a script', () => {
  it('has a line per line of the script, none for the newline that ends it', () => {
    const { container } = render(
      <PreviewView
        preview={{ kind: 'script', title: 'submit', text: '#!/bin/bash\n\necho ok\n', details: {} }}
      />
    );
    const lines = Array.from(container.querySelectorAll('.betty-Preview-line'));
    expect(lines.map(line => line.textContent)).toEqual(['#!/bin/bash', '\n', 'echo ok']);
  });
});

describe("a submission card's details", () => {
  it('shows the GPU estimate as its breakdown, not JSON, and not twice', () => {
    const line = 'GPU memory estimate: 73.1 GiB per GPU (Llama-3.1-8B, lora)';
    const container = preview({ gpu_estimate: ESTIMATE, gpu_memory: line }, [fact('GPU memory', line)]);
    const estimate = byTestId(container, 'betty-gpu-estimate');
    expect(estimate.querySelector('.betty-Estimate-peak')!.textContent).toBe(
      '73.1 GiB per GPU at the start of the backward pass'
    );
    const rows = Array.from(estimate.querySelectorAll('tr')).map(row =>
      Array.from(row.children).map(cell => cell.textContent)
    );
    expect(rows).toEqual([
      ['activations', '51.0 GiB'],
      ['weights', '15.0 GiB'],
      ['runtime', '7.1 GiB']
    ]);
    expect(container.textContent).not.toContain('{');
    expect(container.textContent).not.toContain('GPU memory estimate:');
    expect(Array.from(container.querySelectorAll('dt')).map(dt => dt.textContent)).toEqual([
      'GPU memory'
    ]);
  });

  it('keeps the one-line estimate when the estimate is not one it can read', () => {
    const container = preview({ gpu_estimate: { peak: 'lots' }, gpu_memory: 'GPU memory estimate given' }, [
      fact('GPU memory', 'GPU memory estimate given')
    ]);
    expect(allByTestId(container, 'betty-gpu-estimate')).toHaveLength(0);
    expect(container.textContent).toContain('GPU memory estimate given');
  });

  it("shows a model's hostile estimate as text", () => {
    const container = preview({
      gpu_estimate: {
        ...ESTIMATE,
        model: '<img src=x onerror="window.__pwned=1">',
        breakdown: { '<b>bold</b>': 2, 'train\u202egpj': 1 },
        notes: ['<script>window.__pwned=1</script>']
      }
    });
    expect(container.querySelector('img, b, script')).toBeNull();
    expect(container.textContent).toContain('<img src=x onerror="window.__pwned=1"> · lora');
    expect(container.textContent).toContain('train\\u202egpj');
    expect(container.textContent).toContain('<script>window.__pwned=1</script>');
  });

  it('folds a long detail to its first lines, and shows it all on a click', async () => {
    const command = `env SLURM_EXPORT_ENV=ALL sbatch --export=${'NAME,'.repeat(60)}X job.sbatch`;
    const container = preview({ command, cluster: 'dev' }, [fact('command', command), fact('cluster', 'dev')]);
    const long = byTestId(container, 'betty-preview-long');
    expect(long.className).toBe('betty-Preview-folded');
    expect(long.textContent).toBe(command);
    const unfold = byTestId(container, 'betty-preview-unfold');
    expect(unfold.textContent).toBe(`show all ${command.length} characters`);
    await click(unfold);
    expect(byTestId(container, 'betty-preview-long').className).toBe('');
    expect(allByTestId(container, 'betty-preview-long')).toHaveLength(1);
  });

  it('lets a path break between its folders', () => {
    const path = 'notebooks/experiments/2026-11-22-panel-demo.ipynb';
    const container = preview({ notebook: path, recorded: false }, [fact('notebook', path), fact('recorded', 'no')]);
    const values = container.querySelectorAll('dd');
    expect(values[0].textContent).toBe(path);
    expect(values[0].querySelectorAll('wbr')).toHaveLength(2);
    expect(values[1].textContent).toBe('no');
  });
});

describe('what a card says first', () => {
  const SWEEP = {
    kind: 'script' as const,
    title: 'sweep lr-scan on dev: 4 tasks; each task partition gpu, time 30 min',
    text: '#!/bin/bash\nSLURM_EXPORT_ENV=ALL sbatch job.sbatch\n',
    details: { grid: ['lr=0.1,0.3', 'seed=0,1'], script_path: '/scratch/betty/scripts/x.sbatch' },
    summary: [
      'sweep lr-scan on dev: 4 tasks; each task partition gpu, time 30 min',
      'parameters: lr = 0.1, 0.3; seed = 0, 1'
    ],
    facts: [
      fact('parameters', 'lr = 0.1, 0.3\nseed = 0, 1'),
      { label: 'tasks', text: '', table: [['task', 'lr'], ['0', '0.1'], ['1', '0.3']] },
      fact('script path', '/scratch/betty/scripts/x.sbatch')
    ]
  };

  it('shows its summary first, and the exact script and details behind one click', async () => {
    const { container } = render(<PreviewView preview={SWEEP} />);
    const summary = byTestId(container, 'betty-preview-summary');
    expect(Array.from(summary.children).map(line => line.textContent)).toEqual(SWEEP.summary);
    const exact = byTestId(container, 'betty-preview-exact') as HTMLDetailsElement;
    expect(exact.open).toBe(false);
    expect(exact.querySelector('.betty-Preview-script')).not.toBeNull();
    expect(summary.textContent).not.toContain('sbatch');
    await click(exact.querySelector('summary')!);
    expect(exact.open).toBe(true);
  });

  it('labels details in words, and shows a table as a table', () => {
    const { container } = render(<PreviewView preview={SWEEP} />);
    const labels = Array.from(container.querySelectorAll('dt')).map(dt => dt.textContent);
    expect(labels).toEqual(['parameters', 'tasks', 'script path']);
    const rows = Array.from(byTestId(container, 'betty-preview-table').querySelectorAll('tr')).map(row =>
      Array.from(row.children).map(cell => cell.textContent)
    );
    expect(rows).toEqual([['task', 'lr'], ['0', '0.1'], ['1', '0.3']]);
    expect(container.textContent).not.toContain('|');
    expect(container.textContent).not.toContain('["');
  });

  it('opens the exact text when asked (a checked edit)', () => {
    const { container } = render(<PreviewView preview={SWEEP} open={true} />);
    expect((byTestId(container, 'betty-preview-exact') as HTMLDetailsElement).open).toBe(true);
  });
});

describe('a detail over several lines', () => {
  it("keeps its lines: a notebook run's injected parameters cell reads as code", () => {
    const cell = "# Parameters (injected by Betty)\nlr = 0.25\ntag = '<img src=x onerror=\"window.__pwned=1\">'\n";
    const container = preview({ parameters: cell, partition: 'debug' }, [fact('parameters', cell), fact('partition', 'debug')]);
    const [lines] = allByTestId(container, 'betty-preview-lines');
    expect(lines.tagName).toBe('PRE');
    expect(lines.textContent).toBe(cell.replace(/\n$/, ''));
    expect(lines.querySelector('img')).toBeNull();
    expect(allByTestId(container, 'betty-preview-lines')).toHaveLength(1);
  });
});
