import * as React from 'react';

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

function preview(details: Record<string, unknown>): HTMLElement {
  const { container } = render(
    <PreviewView preview={{ kind: 'script', title: 'submit', text: '#!/bin/bash', details }} />
  );
  return container;
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
    const container = preview({
      gpu_estimate: ESTIMATE,
      gpu_memory: 'GPU memory estimate: 73.1 GiB per GPU (Llama-3.1-8B, lora)'
    });
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
    const container = preview({ gpu_estimate: { peak: 'lots' }, gpu_memory: 'GPU memory estimate given' });
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
    const container = preview({ command, cluster: 'dev' });
    const long = byTestId(container, 'betty-preview-long');
    expect(long.className).toBe('betty-Preview-folded');
    expect(long.textContent).toBe(command);
    const unfold = byTestId(container, 'betty-preview-unfold');
    expect(unfold.textContent).toBe(`show all ${command.length} characters`);
    await click(unfold);
    expect(byTestId(container, 'betty-preview-long').className).toBe('');
    expect(allByTestId(container, 'betty-preview-long')).toHaveLength(1);
  });

  it('lets a path break between its folders, and says yes or no', () => {
    const container = preview({
      notebook: 'notebooks/experiments/2026-11-22-panel-demo.ipynb',
      recorded: false
    });
    const values = container.querySelectorAll('dd');
    expect(values[0].textContent).toBe('notebooks/experiments/2026-11-22-panel-demo.ipynb');
    expect(values[0].querySelectorAll('wbr')).toHaveLength(2);
    expect(values[1].textContent).toBe('no');
  });
});

describe('a detail over several lines', () => {
  it("keeps its lines: a notebook run's injected parameters cell reads as code", () => {
    const cell = "# Parameters (injected by Betty)\nlr = 0.25\ntag = '<img src=x onerror=\"window.__pwned=1\">'\n";
    const container = preview({ parameters: cell, partition: 'debug' });
    const [lines] = allByTestId(container, 'betty-preview-lines');
    expect(lines.tagName).toBe('PRE');
    expect(lines.textContent).toBe(cell.replace(/\n$/, ''));
    expect(lines.querySelector('img')).toBeNull();
    expect(allByTestId(container, 'betty-preview-lines')).toHaveLength(1);
  });
});
