/**
 * A GPU memory estimate as the GPU tab shows it, read from the `gpu_estimate` tool's
 * outcome (`POST gpu/estimate`): the formula estimate, or the traced one with its charts, and
 * what the person's own measured jobs say beside it.
 * The outcome comes over the wire, so every field is checked here; what is not a number
 * or a string is left out.
 */
import { IOutcome } from './models';

/** One part of the peak: its name and GiB (traced beside the formula's when both are known). */
export interface IEstimatePart {
  name: string;
  gib: number;
  formulaGib: number | null;
}

/** What the GPU tab shows of one estimate. */
export interface IEstimateShown {
  model: string;
  peakGib: number;
  traced: boolean;
  /** The formula's peak when the shown one is traced. */
  formulaPeakGib: number | null;
  /** Where in the step the peak happens (traced), or the moment the formula puts it at. */
  where: string;
  parts: IEstimatePart[];
  /** Traced: what `torch.cuda.max_memory_allocated` / `max_memory_reserved` would say. */
  allocatedGib: number | null;
  reservedGib: number | null;
  /** Whether it fits on the GPU type asked about, and the GiB to spare (negative: short). */
  fits: boolean | null;
  headroomGib: number | null;
  gpu: string | null;
  /** Betty's SVG charts (traced): the breakdown bar and the memory over the step. */
  charts: { breakdown: string | null; timeline: string | null };
  notes: string[];
  /** What the person's own measured jobs of this model and method say beside it: their peaks and calibration. */
  measured: string[];
}

/** The most lines of the person's measurements shown under one estimate. */
const MEASURED_LINES = 12;

type Json = Record<string, unknown>;

function record(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Json)
    : {};
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The strings of a list from the wire (anything else in it left out). */
function lines(value: unknown): string[] {
  return Array.isArray(value)
    ? value.filter((line): line is string => typeof line === 'string')
    : [];
}

/** The parts of a breakdown object that are numbers, in its order; a part that is nothing on either side is left out. */
function parts(breakdown: unknown, formula: unknown): IEstimatePart[] {
  const besides = record(formula);
  return Object.entries(record(breakdown)).flatMap(([name, value]) => {
    const gib = num(value);
    const formulaGib = num(besides[name]);
    return gib === null || (gib === 0 && !formulaGib) ? [] : [{ name, gib, formulaGib }];
  });
}

/** Where a traced peak happens, in words: `backward in model.layers.0.mlp, at mm`. */
function tracedWhere(value: Json): string {
  const phase = text(value.peak_phase).replace(/_/g, ' ');
  const module = text(value.peak_module) ? ` in ${text(value.peak_module)}` : '';
  const op = text(value.peak_op) ? `, at ${text(value.peak_op)}` : '';
  return `${phase}${module}${op}`;
}

/** The estimate an outcome of `gpu_estimate` carries; null when it carries none (a failed call). */
export function shownEstimate(outcome: IOutcome): IEstimateShown | null {
  const data = outcome.data;
  if (!outcome.ok || data === null || data.kind !== 'json') {
    return null;
  }
  const value = record(data.value);
  const peak = num(value.peak_gib);
  if (peak === null) {
    return null;
  }
  const formula = record(value.formula);
  const traced = Object.keys(formula).length > 0;
  const charts = record(value.charts);
  return {
    model: text(value.model),
    peakGib: peak,
    traced,
    formulaPeakGib: traced ? num(formula.peak_gib) : null,
    where: traced ? tracedWhere(value) : text(value.peak_moment),
    parts: parts(value.breakdown, traced ? formula.breakdown : {}),
    allocatedGib: traced ? num(value.allocated_gib) : null,
    reservedGib: traced ? num(value.reserved_gib) : null,
    fits: typeof value.fits === 'boolean' ? value.fits : null,
    headroomGib: num(value.headroom_gib),
    gpu: text(value.gpu) || null,
    charts: {
      breakdown: text(charts.breakdown) || null,
      timeline: text(charts.timeline) || null
    },
    notes: Array.isArray(value.notes)
      ? value.notes.filter((n): n is string => typeof n === 'string')
      : [],
    measured: lines(record(value.measured).lines).slice(0, MEASURED_LINES)
  };
}
