/**
 * A pipeline's graph: steps in dependency order with their states, edges labelled with their kind, and
 * the Experiments tab showing it on a pipeline's row only.
 */
import * as React from 'react';

import { ExperimentsView } from '../src/components/ExperimentsView';
import { BOX, layoutPipeline, PipelineGraph } from '../src/components/PipelineGraph';
import { IExperiment, IPipelineGraph, IPipelineStep } from '../src/models';
import { allByTestId, byTestId, render, settle } from './render';

function step(name: string, state: string, why: string, edges: IPipelineStep['edges'] = []): IPipelineStep {
  return { name, job_id: String(name.length), state, why, ended: null, edges, singleton: false, outputs: [] };
}

const GRAPH: IPipelineGraph = {
  slug: '2026-01-01-p',
  ended: 'failed',
  steps: [
    step('split', 'COMPLETED', 'done'),
    step('train', 'OUT_OF_MEMORY', 'failed', [{ step: 'split', kind: 'aftercorr' }]),
    step('plot', 'COMPLETED', 'done', [{ step: 'split', kind: 'afterok' }]),
    { ...step('eval', 'CANCELLED', 'not run: train failed', [{ step: 'train', kind: 'afterok' }]), singleton: true }
  ]
};

describe('PipelineGraph', () => {
  it('puts each step one row below the lowest step it runs after, side by side within a row', () => {
    const layout = layoutPipeline(GRAPH.steps);
    expect(layout.steps.map(each => [each.step.name, each.row, each.column])).toEqual([
      ['split', 0, 0],
      ['train', 1, 0],
      ['plot', 1, 1],
      ['eval', 2, 0]
    ]);
    expect(layout.width).toBe(2 * BOX.margin + 2 * BOX.width + BOX.gapX);
    expect(layout.edges.map(edge => `${edge.from}-${edge.kind}->${edge.to}`)).toEqual([
      'split-aftercorr->train',
      'split-afterok->plot',
      'train-afterok->eval'
    ]);
    const [train, evaluate] = [layout.steps[1], layout.steps[3]];
    expect(layout.edges[2]).toMatchObject({ y1: train.y + BOX.height, y2: evaluate.y });
  });

  it("draws every step with its state and why, and labels each edge with its kind", () => {
    const { container } = render(<PipelineGraph graph={GRAPH} />);
    const boxes = allByTestId(container, 'betty-pipeline-step');
    expect(boxes.map(box => [box.dataset.step, box.dataset.state, box.dataset.why])).toEqual([
      ['split', 'COMPLETED', 'done'],
      ['train', 'OUT_OF_MEMORY', 'failed'],
      ['plot', 'COMPLETED', 'done'],
      ['eval', 'CANCELLED', 'not run: train failed']
    ]);
    expect(boxes[3].textContent).toContain('singleton');
    expect(boxes[1].querySelector('.betty-State-OUT_OF_MEMORY')?.textContent).toBe('OUT_OF_MEMORY · failed');
    const edges = allByTestId(container, 'betty-pipeline-edge');
    expect(edges.map(edge => [edge.dataset.from, edge.dataset.to, edge.textContent])).toEqual([
      ['split', 'train', 'aftercorr'],
      ['split', 'plot', 'afterok'],
      ['train', 'eval', 'afterok']
    ]);
    expect(byTestId(container, 'betty-pipeline-graph').dataset.ended).toBe('failed');
  });

  it('leaves out an edge to a step it does not know, and shows a hostile name as text', () => {
    const hostile = step('<img src=x onerror=alert(1)>', 'PENDING', 'waiting', [{ step: 'gone', kind: 'afterok' }]);
    const { container } = render(<PipelineGraph graph={{ slug: 's', ended: null, steps: [hostile] }} />);
    expect(allByTestId(container, 'betty-pipeline-edge')).toHaveLength(0);
    expect(container.querySelector('img')).toBeNull();
    expect(byTestId(container, 'betty-pipeline-step').textContent).toContain('<img src=x');
  });

  it("shows the graph on a pipeline's row only, read from the pipeline's route", async () => {
    const base: IExperiment = {
      slug: '2026-01-01-p',
      job_id: '11',
      cluster: 'dev',
      submitted: '2026-01-01T00:00:00',
      goal: 'g',
      script: '# ==== step split (starts at once) ====\n#!/bin/bash\n',
      script_path: 'x',
      partition: null,
      resources: {},
      gpu_estimate: null,
      state: 'OUT_OF_MEMORY',
      finished: true,
      page: 'wiki/experiments/p.md',
      notebook: 'notebooks/experiments/p.ipynb',
      segments: ['11', '12']
    };
    const chain = { ...base, slug: '2026-01-02-c', script: '#!/bin/bash\nhostname', submitted: '2026-01-02T00:00:00' };
    const loadPipeline = jest.fn().mockResolvedValue(GRAPH);
    const { container } = render(
      <ExperimentsView
        visible={true}
        loadExperiments={jest.fn().mockResolvedValue({ experiments: [base, chain] })}
        onOpen={jest.fn()}
        loadPipeline={loadPipeline}
      />
    );
    await settle();
    expect(loadPipeline.mock.calls).toEqual([['2026-01-01-p']]);
    const rows = allByTestId(container, 'betty-experiment-row');
    expect(rows.map(row => row.querySelector('[data-testid="betty-pipeline-graph"]') !== null)).toEqual([false, true]);
  });
});
