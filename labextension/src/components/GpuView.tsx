/**
 * The GPU tab: one job's shape (model, method, micro-batch, sequence, GPUs), its peak GPU
 * memory per GPU as a breakdown and, with "Trace the real step", the step traced on meta
 * tensors: where the peak happens, and Betty's charts of the breakdown and of memory over
 * the step. The server computes everything (`POST gpu/estimate`, the agent's
 * `gpu_estimate`); the tab only asks and shows.
 */
import * as React from 'react';

import { BettyAPI, IGpuJob } from '../api';
import { IEstimateShown, shownEstimate } from '../gpuEstimate';
import { ChartImage, visibleText } from '../safe';

/** Props of {@link GpuView}. */
export interface IGpuViewProps {
  api: Pick<BettyAPI, 'gpuModels' | 'gpuEstimate'>;
  /** Whether the tab is on screen: the model catalog loads when it first is. */
  visible: boolean;
}

const METHODS: IGpuJob['method'][] = ['lora', 'qlora', 'full', 'inference'];
const GPU_TYPES = ['', 'A100-40GB', 'A100-80GB', 'H100-80GB', 'L40S', 'RTX4090'];
/** What a recipe sets: options of `gpu_estimate` beyond the form's own fields. */
type RecipeOptions = Omit<IGpuJob, 'model' | 'method' | 'batch_size' | 'seq_len' | 'gpus' | 'gpu' | 'trace'>;

/** The advanced select's training recipes, each with the `gpu_estimate` options it sets. */
const RECIPES: { label: string; options: RecipeOptions }[] = [
  { label: 'as the stack defaults', options: {} },
  { label: 'full checkpointing', options: { grad_ckpt: 'full' } },
  { label: 'selective checkpointing, op (torchtitan)', options: { grad_ckpt: 'op' } },
  { label: 'every 2nd layer checkpointed (torchtitan)', options: { grad_ckpt: 'layer', ckpt_every: 2 } },
  { label: '8-bit AdamW', options: { optimizer: 'adamw8bit' } },
  { label: 'paged 8-bit AdamW', options: { optimizer: 'paged-adamw8bit' } },
  { label: 'optimizer in backward (torchtune)', options: { optimizer_in_backward: true } },
  { label: 'chunked loss (torchtune)', options: { chunked_loss: true } },
  { label: 'FSDP2 mixed precision', options: { sharding: 'fsdp', fsdp_mixed_precision: true } },
  { label: 'FSDP with CPU offload', options: { sharding: 'fsdp', offload: 'params' } }
];

const PART_LABELS: Record<string, string> = {
  kv_cache: 'KV cache',
  runtime: 'runtime/CUDA',
  allocator: 'allocator slack'
};

/** The GPU tab. */
export function GpuView({ api, visible }: IGpuViewProps): JSX.Element {
  const [models, setModels] = React.useState<string[]>([]);
  const [job, setJob] = React.useState<IGpuJob>({
    model: 'Llama-3.1-8B',
    method: 'lora',
    batch_size: 1,
    seq_len: 2048,
    gpus: 1,
    gpu: '',
    trace: false
  });
  const [recipe, setRecipe] = React.useState(0);
  const [busy, setBusy] = React.useState<string | null>(null);
  const [shown, setShown] = React.useState<IEstimateShown | null>(null);
  const [error, setError] = React.useState<string | null>(null);

  React.useEffect(() => {
    if (visible && models.length === 0) {
      api.gpuModels().then(
        answer => setModels(answer.models.map(each => each.name)),
        reason => setError((reason as Error).message)
      );
    }
  }, [visible, models.length, api]);

  const estimate = async () => {
    setBusy(
      job.trace
        ? 'Tracing the real step on meta tensors… (the first trace also loads PyTorch: 10–20 s)'
        : 'Estimating…'
    );
    setError(null);
    try {
      const { gpu, ...rest } = job;
      const shaped = { ...rest, ...RECIPES[recipe].options };
      const outcome = await api.gpuEstimate(gpu ? { ...shaped, gpu } : shaped);
      const found = shownEstimate(outcome);
      setShown(found);
      setError(found ? null : outcome.summary);
    } catch (reason) {
      setShown(null);
      setError((reason as Error).message);
    } finally {
      setBusy(null);
    }
  };

  const set = (change: Partial<IGpuJob>) => setJob(before => ({ ...before, ...change }));
  return (
    <div className="betty-Gpu" data-testid="betty-gpu">
      <div className="betty-Tab-toolbar">
        <span className="betty-Tab-caption">GPU memory of one job</span>
      </div>
      <div className="betty-Gpu-form">
        <label>
          model
          <select
            data-testid="betty-gpu-model"
            value={job.model}
            onChange={event => set({ model: event.target.value })}
          >
            {(models.includes(job.model) ? models : [job.model, ...models]).map(name => (
              <option key={name} value={name}>
                {visibleText(name)}
              </option>
            ))}
          </select>
        </label>
        <label>
          method
          <select
            data-testid="betty-gpu-method"
            value={job.method}
            onChange={event => set({ method: event.target.value as IGpuJob['method'] })}
          >
            {METHODS.map(method => (
              <option key={method} value={method}>
                {method}
              </option>
            ))}
          </select>
        </label>
        <NumberField
          label="micro-batch"
          testId="betty-gpu-batch"
          value={job.batch_size}
          onChange={n => set({ batch_size: n })}
        />
        <NumberField
          label="sequence"
          testId="betty-gpu-seq"
          value={job.seq_len}
          onChange={n => set({ seq_len: n })}
        />
        <NumberField
          label="GPUs"
          testId="betty-gpu-gpus"
          value={job.gpus}
          onChange={n => set({ gpus: n })}
        />
        <label>
          on
          <select
            data-testid="betty-gpu-type"
            value={job.gpu}
            onChange={event => set({ gpu: event.target.value })}
          >
            {GPU_TYPES.map(name => (
              <option key={name} value={name}>
                {name || 'any GPU'}
              </option>
            ))}
          </select>
        </label>
        <label title="Advanced: a training recipe the estimate counts as its stack runs it">
          recipe
          <select
            data-testid="betty-gpu-recipe"
            value={recipe}
            onChange={event => setRecipe(Number(event.target.value))}
          >
            {RECIPES.map((each, index) => (
              <option key={each.label} value={index}>
                {each.label}
              </option>
            ))}
          </select>
        </label>
        <label
          className="betty-Gpu-trace"
          title="Runs forward, backward and the optimizer step on meta tensors (no GPU, no weights): seconds of CPU on the server"
        >
          <input
            type="checkbox"
            data-testid="betty-gpu-trace"
            checked={job.trace}
            onChange={event => set({ trace: event.target.checked })}
          />
          Trace the real step
        </label>
        <button
          className="betty-Button"
          data-testid="betty-gpu-run"
          disabled={busy !== null}
          onClick={() => void estimate()}
        >
          Estimate
        </button>
      </div>
      {busy && (
        <div className="betty-Gpu-busy" data-testid="betty-gpu-busy">
          {busy}
        </div>
      )}
      {error && (
        <div className="betty-Tab-error" role="alert" data-testid="betty-gpu-error">
          {visibleText(error)}
        </div>
      )}
      {shown && !busy && <EstimateShown shown={shown} />}
    </div>
  );
}

function NumberField(props: {
  label: string;
  testId: string;
  value: number;
  onChange: (value: number) => void;
}): JSX.Element {
  return (
    <label>
      {props.label}
      <input
        type="number"
        min={1}
        data-testid={props.testId}
        value={props.value}
        onChange={event => props.onChange(Math.max(1, Math.floor(Number(event.target.value) || 1)))}
      />
    </label>
  );
}

/** One estimate: its peak, where it happens, its parts, (traced) Betty's two charts and the person's measured
 * peaks. */
function EstimateShown({ shown }: { shown: IEstimateShown }): JSX.Element {
  return (
    <div className="betty-Gpu-result" data-testid="betty-gpu-result" data-traced={shown.traced}>
      <div className="betty-Gpu-peak" data-testid="betty-gpu-peak">
        <b>{shown.peakGib.toFixed(1)} GiB per GPU</b>
        {shown.traced ? ' traced' : ''} for {visibleText(shown.model)}
        {shown.formulaPeakGib !== null &&
          ` (the formula estimate says ${shown.formulaPeakGib.toFixed(1)})`}
      </div>
      <div className="betty-JobRow-sub" data-testid="betty-gpu-where">
        the peak: {visibleText(shown.where)}
      </div>
      {shown.allocatedGib !== null && shown.reservedGib !== null && (
        <div className="betty-JobRow-sub">
          allocated {shown.allocatedGib.toFixed(2)} GiB, reserved {shown.reservedGib.toFixed(2)} GiB
        </div>
      )}
      {shown.fits !== null && shown.gpu && (
        <div className="betty-JobRow-sub" data-testid="betty-gpu-fits">
          on {visibleText(shown.gpu)}:{' '}
          {shown.fits
            ? `fits, ${(shown.headroomGib ?? 0).toFixed(1)} GiB to spare`
            : `does not fit, ${(-(shown.headroomGib ?? 0)).toFixed(1)} GiB short`}
        </div>
      )}
      <table className="betty-Gpu-parts" data-testid="betty-gpu-parts">
        <thead>
          <tr>
            <th />
            <th>{shown.traced ? 'traced' : 'GiB'}</th>
            {shown.traced && <th>formula</th>}
          </tr>
        </thead>
        <tbody>
          {shown.parts.map(part => (
            <tr key={part.name} data-part={part.name}>
              <td>{visibleText(PART_LABELS[part.name] ?? part.name.replace(/_/g, ' '))}</td>
              <td>{part.gib.toFixed(2)}</td>
              {shown.traced && (
                <td>{part.formulaGib === null ? '—' : part.formulaGib.toFixed(2)}</td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {shown.charts.breakdown && (
        <ChartImage
          svg={shown.charts.breakdown}
          testId="betty-gpu-chart-breakdown"
          alt={`traced GPU memory of ${shown.model}`}
        />
      )}
      {shown.charts.timeline && (
        <ChartImage
          svg={shown.charts.timeline}
          testId="betty-gpu-chart-timeline"
          alt={`live GPU memory of ${shown.model} over the step`}
        />
      )}
      {shown.notes.map((note, index) => (
        <div key={index} className="betty-Gpu-note">
          note: {visibleText(note)}
        </div>
      ))}
      {shown.measured.length > 0 && (
        <div className="betty-Gpu-measured" data-testid="betty-gpu-measured">
          <div className="betty-JobRow-sub">measured beside it:</div>
          {shown.measured.map((line, index) => (
            <div key={index} className="betty-Gpu-note">
              {visibleText(line)}
            </div>
          ))}
        </div>
      )}
    </div>
  );
}
