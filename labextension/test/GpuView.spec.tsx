/**
 * The GPU tab: the job's shape goes to `gpu_estimate` as asked, a traced estimate shows its
 * parts beside the formula's, where its peak is and Betty's two charts as images, and text
 * from outside stays text.
 */
import * as React from 'react';
import { act } from 'react';

import { GpuView } from '../src/components/GpuView';
import { shownEstimate } from '../src/gpuEstimate';
import { IOutcome } from '../src/models';
import { allByTestId, byTestId, click, render, settle, type, useFakeClock } from './render';

const HOSTILE = 'evil<img src=x onerror=alert(1)>\u202e';
const TIMELINE = '<svg xmlns="http://www.w3.org/2000/svg"><title>Live &lt;img&gt;</title></svg>';

function traced(model = 'Llama-3.2-1B'): IOutcome {
  return {
    ok: true,
    summary: `${model}: 5.9 GiB per GPU traced`,
    artifacts: [],
    text: null,
    data: {
      kind: 'json',
      value: {
        model,
        peak_gib: 5.88,
        allocated_gib: 5.08,
        reserved_gib: 5.37,
        breakdown: {
          weights: 2.31,
          activations: 2.27,
          logits: 0.49,
          allocator: 0.29,
          runtime: 0.51
        },
        peak_phase: 'backward',
        peak_op: '_log_softmax_backward_data',
        peak_module: 'LogSoftmaxBackward0',
        notes: ['attention counted as flash attention does it'],
        formula: {
          peak_gib: 6.13,
          breakdown: { weights: 2.31, activations: 2.79, runtime: 1.01 }
        },
        gpu: 'A100-40GB',
        fits: true,
        headroom_gib: 34.1,
        charts: {
          breakdown: '<svg xmlns="http://www.w3.org/2000/svg"></svg>',
          timeline: TIMELINE
        }
      }
    }
  };
}

function api(outcome: IOutcome) {
  return {
    gpuModels: jest.fn().mockResolvedValue({
      models: [{ name: 'Llama-3.2-1B' }, { name: 'Llama-3.1-8B' }]
    }),
    gpuEstimate: jest.fn().mockResolvedValue(outcome)
  };
}

function choose(select: HTMLSelectElement, value: string): void {
  act(() => {
    select.value = value;
    select.dispatchEvent(new Event('change', { bubbles: true }));
  });
}

describe('GpuView', () => {
  useFakeClock();

  it('asks for a trace of the job as shaped, and shows the traced parts, the peak and both charts', async () => {
    const calls = api(traced());
    const { container } = render(<GpuView api={calls} visible={true} />);
    await settle();
    choose(byTestId<HTMLSelectElement>(container, 'betty-gpu-model'), 'Llama-3.2-1B');
    type(byTestId<HTMLInputElement>(container, 'betty-gpu-batch'), '2');
    type(byTestId<HTMLInputElement>(container, 'betty-gpu-seq'), '512');
    choose(byTestId<HTMLSelectElement>(container, 'betty-gpu-type'), 'A100-40GB');
    await click(byTestId(container, 'betty-gpu-trace'));
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(calls.gpuEstimate).toHaveBeenCalledWith({
      model: 'Llama-3.2-1B',
      method: 'lora',
      batch_size: 2,
      seq_len: 512,
      gpus: 1,
      gpu: 'A100-40GB',
      trace: true
    });
    expect(byTestId(container, 'betty-gpu-peak').textContent).toBe(
      '5.9 GiB per GPU traced for Llama-3.2-1B (the formula estimate says 6.1)'
    );
    expect(byTestId(container, 'betty-gpu-where').textContent).toBe(
      'the peak: backward in LogSoftmaxBackward0, at _log_softmax_backward_data'
    );
    expect(byTestId(container, 'betty-gpu-fits').textContent).toBe(
      'on A100-40GB: fits, 34.1 GiB to spare'
    );
    const rows = Array.from(byTestId(container, 'betty-gpu-parts').querySelectorAll('tbody tr'));
    expect(rows.map(row => Array.from(row.children).map(cell => cell.textContent))).toEqual([
      ['weights', '2.31', '2.31'],
      ['activations', '2.27', '2.79'],
      ['logits', '0.49', '—'],
      ['allocator slack', '0.29', '—'],
      ['runtime/CUDA', '0.51', '1.01']
    ]);
    const timeline = byTestId<HTMLImageElement>(container, 'betty-gpu-chart-timeline');
    expect(timeline.getAttribute('src')).toBe(
      `data:image/svg+xml;charset=utf-8,${encodeURIComponent(TIMELINE)}`
    );
    expect(allByTestId(container, 'betty-gpu-chart-breakdown')).toHaveLength(1);
  });

  it('sends the advanced recipe chosen as the options it sets, and nothing of it by default', async () => {
    const calls = api(traced());
    const { container } = render(<GpuView api={calls} visible={true} />);
    await settle();
    const recipe = byTestId<HTMLSelectElement>(container, 'betty-gpu-recipe');
    const labels = Array.from(recipe.options).map(option => option.textContent);
    expect(labels[0]).toBe('as the stack defaults');
    choose(byTestId<HTMLSelectElement>(container, 'betty-gpu-method'), 'full');
    type(byTestId<HTMLInputElement>(container, 'betty-gpu-gpus'), '8');
    choose(recipe, String(labels.indexOf('FSDP2 mixed precision')));
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(calls.gpuEstimate).toHaveBeenLastCalledWith({
      model: 'Llama-3.1-8B',
      method: 'full',
      batch_size: 1,
      seq_len: 2048,
      gpus: 8,
      trace: false,
      sharding: 'fsdp',
      fsdp_mixed_precision: true
    });
    choose(recipe, String(labels.indexOf('every 2nd layer checkpointed (torchtitan)')));
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(calls.gpuEstimate).toHaveBeenLastCalledWith(expect.objectContaining({ grad_ckpt: 'layer', ckpt_every: 2 }));
    choose(recipe, '0');
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(Object.keys(calls.gpuEstimate.mock.calls[2][0]).sort()).toEqual([
      'batch_size',
      'gpus',
      'method',
      'model',
      'seq_len',
      'trace'
    ]);
  });

  it('keeps a hostile model name as text, the charts as images', async () => {
    const { container } = render(<GpuView api={api(traced(HOSTILE))} visible={true} />);
    await settle();
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(byTestId(container, 'betty-gpu-peak').textContent).toContain(
      'evil<img src=x onerror=alert(1)>\\u202e'
    );
    expect(container.querySelectorAll('img:not(.betty-Chart)')).toHaveLength(0);
    expect(container.querySelector('svg')).toBeNull();
  });

  it('shows nothing for a chart that is not one SVG element', async () => {
    const outcome = traced();
    const value = (outcome.data as { value: Record<string, unknown> }).value;
    value.charts = {
      breakdown: '<img src=x onerror=alert(1)>',
      timeline: '<svg></svg><script>x</script>'
    };
    const { container } = render(<GpuView api={api(outcome)} visible={true} />);
    await settle();
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(allByTestId(container, 'betty-gpu-result')).toHaveLength(1);
    expect(container.querySelectorAll('img')).toHaveLength(0);
  });

  it('shows a failed call as its one line, and nothing else', async () => {
    const failed: IOutcome = {
      ok: false,
      summary:
        "the traced estimate needs PyTorch, transformers and peft: pip install 'betty-jupyter[trace]'",
      artifacts: [],
      text: null,
      data: null
    };
    const { container } = render(<GpuView api={api(failed)} visible={true} />);
    await settle();
    await click(byTestId(container, 'betty-gpu-trace'));
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(byTestId(container, 'betty-gpu-error').textContent).toBe(failed.summary);
    expect(allByTestId(container, 'betty-gpu-result')).toHaveLength(0);
  });

  it("shows the person's measured peaks and calibration under the estimate, as text", async () => {
    const outcome = traced();
    const value = (outcome.data as { value: Record<string, unknown> }).value;
    value.measured = {
      lines: [
        'your measured Llama-3.2-1B lora job 2026-11-29-tiny (job 901, 1 × a100): measured GPU peak ' +
          '6.1 GiB (estimated 5.9 GiB, +3.4%) · PyTorch allocated 5.0 GiB (reserved 5.5 GiB)',
        `your calibration: ${HOSTILE}`,
        42
      ]
    };
    const { container } = render(<GpuView api={api(outcome)} visible={true} />);
    await settle();
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    const shown = byTestId(container, 'betty-gpu-measured');
    expect(shown.querySelectorAll('.betty-Gpu-note')).toHaveLength(2);
    expect(shown.textContent).toContain('PyTorch allocated 5.0 GiB (reserved 5.5 GiB)');
    expect(shown.textContent).toContain(
      'your calibration: evil<img src=x onerror=alert(1)>\\u202e'
    );
    expect(shown.querySelectorAll('img')).toHaveLength(0);
  });

  it('shows no measurements when the answer has none', async () => {
    const { container } = render(<GpuView api={api(traced())} visible={true} />);
    await settle();
    await click(byTestId(container, 'betty-gpu-run'));
    await settle();
    expect(allByTestId(container, 'betty-gpu-measured')).toHaveLength(0);
  });

  it('reads only numbers as numbers from the wire, and leaves out what is nothing on both sides', () => {
    const outcome = traced();
    const value = (outcome.data as { value: Record<string, unknown> }).value;
    value.breakdown = { weights: '2.3', activations: 1.5, kv_cache: 0, gradients: 0 };
    (value.formula as Record<string, unknown>).breakdown = { activations: 2.79, gradients: 0.01 };
    expect(shownEstimate(outcome)?.parts).toEqual([
      { name: 'activations', gib: 1.5, formulaGib: 2.79 },
      { name: 'gradients', gib: 0, formulaGib: 0.01 }
    ]);
    expect(shownEstimate({ ...outcome, ok: false })).toBeNull();
  });
});
