/**
 * The resources a batch script asks for in its `#SBATCH` lines (partition, time, memory,
 * GPUs), read from the script and written back into it. The script stays the one source of
 * truth: a field shows what its line says, and changing the field rewrites that line (or adds
 * or removes it). Whether the values make sense is the server's to say: an edited script is
 * checked by the same code as the model's, and previewed again, before it can be approved.
 */

/** The resources a card's edit form shows; '' when the script does not say. */
export interface IResources {
  partition: string;
  time: string;
  mem: string;
  gpus: string;
}

/** Which resource a field edits. */
export type Resource = keyof IResources;

/** The resources, in the order the form shows them, with their labels. */
export const RESOURCES: { key: Resource; label: string; placeholder: string }[] = [
  { key: 'partition', label: 'Partition', placeholder: 'default' },
  { key: 'time', label: 'Time', placeholder: 'e.g. 30 or 1:00:00' },
  { key: 'mem', label: 'Memory', placeholder: 'e.g. 4G' },
  { key: 'gpus', label: 'GPUs', placeholder: '0' }
];

/** The option names (long and short) each resource is written with; the first is written when one is added. */
const OPTIONS: Record<Resource, string[]> = {
  partition: ['--partition', '-p'],
  time: ['--time', '-t'],
  mem: ['--mem'],
  gpus: ['--gres', '--gpus', '-G', '--gpus-per-node']
};

const DIRECTIVE = /^(\s*#SBATCH\s+)(--?[A-Za-z][\w-]*)(?:(=|\s+)(\S*))?(.*)$/;

interface IDirective {
  index: number;
  lead: string;
  option: string;
  separator: string;
  value: string;
  rest: string;
}

/** The `#SBATCH` lines before the first command (sbatch stops reading them there). */
function directives(lines: string[]): IDirective[] {
  const found: IDirective[] = [];
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    if (line.trim() === '' || (line.trimStart().startsWith('#') && !/^\s*#SBATCH\b/.test(line))) {
      continue;
    }
    const match = DIRECTIVE.exec(line);
    if (match === null) {
      break;
    }
    const [, lead, option, separator = '', value = '', rest = ''] = match;
    found.push({ index, lead, option, separator, value, rest });
  }
  return found;
}

function find(lines: string[], resource: Resource): IDirective | undefined {
  const names = OPTIONS[resource];
  const candidates = directives(lines).filter(each => names.includes(each.option));
  if (resource === 'gpus') {
    return candidates.find(each => each.option !== '--gres' || /(^|,)gpu(:|$)/.test(each.value));
  }
  return candidates[candidates.length - 1];
}

/** How many GPUs a `--gres=gpu[:type]:N` or `--gpus=[type:]N` value asks for. */
function gpuCount(directive: IDirective): string {
  const value = directive.value;
  if (directive.option === '--gres') {
    const gpu = value.split(',').find(each => each === 'gpu' || each.startsWith('gpu:')) ?? '';
    const last = gpu.split(':').pop() ?? '';
    return /^\d+$/.test(last) ? last : '1';
  }
  const last = value.split(':').pop() ?? '';
  return /^\d+$/.test(last) ? last : value;
}

/** What `script`'s `#SBATCH` lines ask for. */
export function resourcesOf(script: string): IResources {
  const lines = script.split('\n');
  const value = (resource: Resource) => {
    const directive = find(lines, resource);
    if (directive === undefined) {
      return '';
    }
    return resource === 'gpus' ? gpuCount(directive) : directive.value;
  };
  return {
    partition: value('partition'),
    time: value('time'),
    mem: value('mem'),
    gpus: value('gpus')
  };
}

/** The GPU value of `directive` with its count set to `count`, its type (`gpu:a100:2`) kept. */
function withGpuCount(directive: IDirective, count: string): string {
  if (directive.option === '--gres') {
    return directive.value
      .split(',')
      .map(each => {
        if (each !== 'gpu' && !each.startsWith('gpu:')) {
          return each;
        }
        const parts = each.split(':');
        if (parts.length > 1 && /^\d+$/.test(parts[parts.length - 1])) {
          parts[parts.length - 1] = count;
        } else {
          parts.push(count);
        }
        return parts.join(':');
      })
      .join(',');
  }
  const parts = directive.value.split(':');
  parts[parts.length - 1] = count;
  return parts.join(':');
}

/**
 * `script` with `resource` set to `value`: its `#SBATCH` line rewritten in place, added after
 * the last `#SBATCH` line (or the `#!` line) when there is none, removed when `value` is ''
 * (or '0' GPUs). Nothing else in the script changes.
 */
export function withResource(script: string, resource: Resource, value: string): string {
  const lines = script.split('\n');
  const clean = value.trim();
  const drop = clean === '' || (resource === 'gpus' && clean === '0');
  const directive = find(lines, resource);
  if (directive !== undefined) {
    if (drop) {
      lines.splice(directive.index, 1);
      return lines.join('\n');
    }
    const written = resource === 'gpus' ? withGpuCount(directive, clean) : clean;
    const separator = directive.separator || '=';
    lines[directive.index] =
      `${directive.lead}${directive.option}${separator}${written}${directive.rest}`;
    return lines.join('\n');
  }
  if (drop) {
    return script;
  }
  const option = resource === 'gpus' ? '--gres' : OPTIONS[resource][0];
  const line = `#SBATCH ${option}=${resource === 'gpus' ? `gpu:${clean}` : clean}`;
  const all = directives(lines);
  const after = all.length > 0 ? all[all.length - 1].index : lines[0]?.startsWith('#!') ? 0 : -1;
  lines.splice(after + 1, 0, line);
  return lines.join('\n');
}
