/**
 * The prompts Betty's commands send: the person's code or script, fenced, with what to do
 * with it. Pure functions, so what the agent is asked can be read and tested in one place.
 */

/** Longest piece of code sent in one prompt; the server refuses scripts over 100,000 characters. */
export const MAX_CODE_CHARS = 50_000;

/** `code` in a markdown fence that its own backticks cannot close, cut at {@link MAX_CODE_CHARS}. */
export function fenced(code: string, language = ''): string {
  const cut = code.length > MAX_CODE_CHARS;
  const body = (cut ? code.slice(0, MAX_CODE_CHARS) : code).replace(/\n+$/, '');
  const longest = Math.max(2, ...(body.match(/`+/g) ?? []).map(run => run.length));
  const fence = '`'.repeat(longest + 1);
  const note = cut ? `\n(cut after ${MAX_CODE_CHARS} characters)` : '';
  return `${fence}${language}\n${body}\n${fence}${note}`;
}

/** "Betty: Ask about the selected cell". */
export function askAboutCellPrompt(source: string, path: string, language = 'python'): string {
  return (
    `Here is a cell from my notebook \`${path}\`. Explain what it does, and anything I should ` +
    `know before running it on the cluster.\n\n${fenced(source, language)}`
  );
}

/** "Betty: Size GPUs for the selected script". */
export function sizeGpusPrompt(source: string, path: string, language = ''): string {
  return (
    `Estimate the GPU memory per GPU that this code from \`${path}\` needs, with gpu_estimate: ` +
    'read the model, precision, training method, batch size, sequence length and parallelism ' +
    'from the code and say what you had to assume. Then tell me which partition and GPU type ' +
    `of the cluster it fits, and what to change if it does not fit.\n\n${fenced(source, language)}`
  );
}

/** "Submit with Betty" on a `.sbatch` file. */
export function submitScriptPrompt(script: string, path: string): string {
  return (
    `Submit the batch script \`${path}\` with cluster_submit, exactly as written below. Take ` +
    `the goal from its comments, or use "Submitted from ${path}".\n\n${fenced(script, 'bash')}`
  );
}
