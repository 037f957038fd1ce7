/**
 * A sparkline: a few numbers as a small inline SVG line, no chart library.
 */
import * as React from 'react';

/** Props of {@link Sparkline}. */
export interface ISparklineProps {
  values: readonly number[];
  /** What the line shows, for screen readers and as its tooltip. */
  label: string;
  testId?: string;
}

/** `values`, oldest first, as a small line scaled to the highest; the newest is the dot. */
export function Sparkline({ values, label, testId }: ISparklineProps): JSX.Element {
  const [width, height] = [72, 16];
  const top = Math.max(1, ...values);
  const step = values.length > 1 ? (width - 4) / (values.length - 1) : 0;
  const points = values.map((value, index) => [
    values.length > 1 ? 2 + index * step : width / 2,
    height - 2 - (value / top) * (height - 4)
  ]);
  const [lastX, lastY] = points[points.length - 1] ?? [0, 0];
  return (
    <svg
      className="betty-Sparkline"
      data-testid={testId}
      data-points={values.length}
      width={width}
      height={height}
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={label}
    >
      <title>{label}</title>
      <polyline
        points={points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}
        fill="none"
        stroke="currentColor"
        strokeWidth={1.2}
      />
      <circle cx={lastX} cy={lastY} r={1.8} fill="currentColor" />
    </svg>
  );
}
