/**
 * A pipeline as a graph: its steps as boxes, top to bottom in dependency order (a step sits one row
 * below the lowest step it runs after), each with its state and why, and an arrow from each step to
 * the steps that run after it, labelled with the edge's kind (`afterok`, `aftercorr`). Plain SVG.
 */
import * as React from 'react';

import { IPipelineGraph, IPipelineStep } from '../models';
import { visibleText } from '../safe';

/** A box's size and the room between boxes, in SVG units (pixels at scale 1). */
export const BOX = { width: 136, height: 42, gapX: 14, gapY: 36, margin: 6 };

/** Where one step's box is drawn. */
export interface IPlacedStep {
  step: IPipelineStep;
  row: number;
  column: number;
  x: number;
  y: number;
}

/** One edge as drawn: from the earlier step's box to the later one's, with its kind. */
export interface IPlacedEdge {
  from: string;
  to: string;
  kind: string;
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

/** The graph laid out: boxes, edges and the drawing's size. */
export interface ILayout {
  steps: IPlacedStep[];
  edges: IPlacedEdge[];
  width: number;
  height: number;
}

/**
 * Each step's row (one below the lowest row of the steps it runs after; 0 for a step that starts at
 * once) and column (its place among the steps of its row, in the pipeline's order). An edge naming
 * no earlier step is left out.
 */
export function layoutPipeline(steps: IPipelineStep[]): ILayout {
  const rowOf = new Map<string, number>();
  const perRow: number[] = [];
  const placed: IPlacedStep[] = [];
  for (const step of steps) {
    const earlier = step.edges.map(edge => rowOf.get(edge.step)).filter((row): row is number => row !== undefined);
    const row = earlier.length ? Math.max(...earlier) + 1 : 0;
    const column = perRow[row] ?? 0;
    perRow[row] = column + 1;
    rowOf.set(step.name, row);
    placed.push({
      step,
      row,
      column,
      x: BOX.margin + column * (BOX.width + BOX.gapX),
      y: BOX.margin + row * (BOX.height + BOX.gapY)
    });
  }
  const byName = new Map(placed.map(each => [each.step.name, each]));
  const edges: IPlacedEdge[] = [];
  for (const later of placed) {
    for (const edge of later.step.edges) {
      const earlier = byName.get(edge.step);
      if (earlier === undefined || earlier === later) {
        continue;
      }
      edges.push({
        from: earlier.step.name,
        to: later.step.name,
        kind: edge.kind,
        x1: earlier.x + BOX.width / 2,
        y1: earlier.y + BOX.height,
        x2: later.x + BOX.width / 2,
        y2: later.y
      });
    }
  }
  const columns = Math.max(1, ...perRow);
  return {
    steps: placed,
    edges,
    width: 2 * BOX.margin + columns * BOX.width + (columns - 1) * BOX.gapX,
    height: 2 * BOX.margin + perRow.length * BOX.height + Math.max(0, perRow.length - 1) * BOX.gapY
  };
}

/** `text` cut to `most` characters, with an ellipsis where it was cut. */
function cut(text: string, most: number): string {
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

/** The graph of one pipeline. */
export function PipelineGraph({ graph }: { graph: IPipelineGraph }): JSX.Element {
  const layout = layoutPipeline(graph.steps);
  const marker = `betty-pipeline-arrow-${graph.slug.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  return (
    <div className="betty-PipelineGraph" data-testid="betty-pipeline-graph" data-ended={graph.ended ?? ''}>
      <svg
        width={layout.width}
        height={layout.height}
        viewBox={`0 0 ${layout.width} ${layout.height}`}
        role="img"
        aria-label={`pipeline ${visibleText(graph.slug)}: ${graph.steps.length} steps`}
      >
        <defs>
          <marker id={marker} viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto">
            <path d="M0,0 L8,4 L0,8 z" className="betty-PipelineGraph-arrow" />
          </marker>
        </defs>
        {layout.edges.map(edge => (
          <g
            key={`${edge.from}->${edge.to}`}
            className={`betty-PipelineGraph-edge betty-PipelineGraph-${edge.kind}`}
            data-testid="betty-pipeline-edge"
            data-from={edge.from}
            data-to={edge.to}
            data-kind={edge.kind}
          >
            <line x1={edge.x1} y1={edge.y1} x2={edge.x2} y2={edge.y2} markerEnd={`url(#${marker})`} />
            <text x={(edge.x1 + edge.x2) / 2 + 4} y={(edge.y1 + edge.y2) / 2 + 4}>
              {edge.kind}
            </text>
          </g>
        ))}
        {layout.steps.map(({ step, x, y }) => (
          <g
            key={step.name}
            className="betty-PipelineGraph-step"
            data-testid="betty-pipeline-step"
            data-step={step.name}
            data-state={step.state}
            data-why={step.why}
          >
            <title>
              {`step ${visibleText(step.name)}, job ${step.job_id}: ${step.state}, ${visibleText(step.why)}` +
                (step.singleton ? ' · singleton' : '') +
                (step.outputs.length ? ` · leaves ${step.outputs.map(visibleText).join(', ')}` : '')}
            </title>
            <rect x={x} y={y} width={BOX.width} height={BOX.height} rx={4} />
            <text x={x + 6} y={y + 16} className="betty-PipelineGraph-name">
              {cut(visibleText(step.name), 18) + (step.singleton ? ' ⋅ singleton' : '')}
            </text>
            <text x={x + 6} y={y + 33} className={`betty-State betty-State-${step.state}`}>
              {cut(`${step.state} · ${visibleText(step.why)}`, 24)}
            </text>
          </g>
        ))}
      </svg>
    </div>
  );
}

/** A pipeline's graph, loaded when shown; a refusal shows its one line. */
export function PipelineGraphLoader(props: {
  slug: string;
  /** Changes whenever the experiments were read again: the graph is read again too. */
  version: number;
  loadPipeline: (slug: string) => Promise<IPipelineGraph>;
}): JSX.Element {
  const { slug, version, loadPipeline } = props;
  const [graph, setGraph] = React.useState<IPipelineGraph | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  React.useEffect(() => {
    let live = true;
    loadPipeline(slug).then(
      answer => live && (setGraph(answer), setError(null)),
      reason => live && setError((reason as Error).message)
    );
    return () => {
      live = false;
    };
  }, [slug, version, loadPipeline]);
  if (error !== null) {
    return (
      <div className="betty-Tab-error" role="alert">
        {error}
      </div>
    );
  }
  return graph === null ? <></> : <PipelineGraph graph={graph} />;
}
