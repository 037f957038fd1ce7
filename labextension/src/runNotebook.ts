/**
 * "Run on cluster" for the open notebook: the form's texts turned into `notebook_submit`'s
 * arguments, or the one line that says what is wrong (the texts are kept as typed). The tool
 * checks everything again on the server; this only catches a mistake before anything is sent.
 */

/** What the person typed in the form, as typed. */
export interface IRunTexts {
  partition: string;
  /** The time limit in minutes. */
  time: string;
  gpus: string;
  /** A named environment of the cluster's profile ('' for the node's `python3`). */
  env: string;
  /** One `name=value` a line; blank lines are skipped. */
  params: string;
}

/** The form's first texts: one hour, no GPU, no parameters. */
export const EMPTY_RUN: IRunTexts = { partition: '', time: '60', gpus: '0', env: '', params: '' };

/** The form's first texts on a cluster whose profile names `environments`: the first of them, if any. */
export function firstRun(environments: readonly string[]): IRunTexts {
  return { ...EMPTY_RUN, env: environments[0] ?? '' };
}

/** Python's keywords: not names a parameter can take. */
const KEYWORDS = new Set(
  (
    'False None True and as assert async await break class continue def del elif else except ' +
    'finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'
  ).split(' ')
);

/** Whether `name` is a Python identifier a parameters cell can assign (ASCII, no keyword, no `__` start). */
export function isParameterName(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !KEYWORDS.has(name) && !name.startsWith('__');
}

/** `notebook_submit`'s arguments for `notebook` from `texts`, or the one-line error. */
export function runArguments(
  notebook: string,
  texts: IRunTexts
): { args: Record<string, unknown> } | { error: string } {
  const partition = texts.partition.trim();
  if (!/^[A-Za-z0-9._-]+$/.test(partition)) {
    return { error: 'Pick a partition.' };
  }
  const time = Number(texts.time.trim());
  if (!Number.isInteger(time) || time < 1) {
    return { error: 'Time: a whole number of minutes, at least 1.' };
  }
  const gpus = Number(texts.gpus.trim() || '0');
  if (!Number.isInteger(gpus) || gpus < 0) {
    return { error: 'GPUs: a whole number, 0 or more.' };
  }
  const params: string[] = [];
  const lines = texts.params.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index].trim();
    if (line === '') {
      continue;
    }
    const equals = line.indexOf('=');
    const name = equals < 0 ? line : line.slice(0, equals).trim();
    if (equals < 0 || !isParameterName(name)) {
      const shown = name.length > 40 ? `${name.slice(0, 40)}…` : name;
      return {
        error: `Parameter line ${index + 1}: "${shown}" is not a Python name; write one name=value a line.`
      };
    }
    params.push(`${name}=${line.slice(equals + 1).trim()}`);
  }
  const env = texts.env.trim();
  const args: Record<string, unknown> = { notebook, partition, time, gpus, params };
  if (env) {
    args.env = env;
  }
  return { args };
}
