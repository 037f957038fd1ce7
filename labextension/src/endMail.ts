/**
 * The "e-mail me when it ends" choice of a submission card: the card's arguments with Slurm's
 * end mail asked for or not (`end_mail`), as an edit the server checks, previews and binds
 * again before the person can approve it.
 */
import { IApprovalRequest } from './events';

/** The line Betty adds after a script's `#!` for `end_mail` (`#SBATCH --mail-type=END`, no address). */
export const END_MAIL_LINE = '#SBATCH --mail-type=END';

/** Whether a card offers the choice: a submission whose job a second approver need not see again. */
export function offersEndMail(request: IApprovalRequest): boolean {
  return (
    request.tool === 'cluster_submit' &&
    typeof request.args.script === 'string' &&
    !('second approver' in (request.preview.details ?? {}))
  );
}

/** Whether the card's call asks for the end mail now. */
export function asksEndMail(args: Record<string, unknown>): boolean {
  return args.end_mail === true;
}

/**
 * The card's arguments with the end mail asked for (`on`) or not. Turning it off takes out the
 * line Betty added for it (right after the `#!`), never a mail line the script had of its own.
 */
export function withEndMail(args: Record<string, unknown>, on: boolean): Record<string, unknown> {
  const script = String(args.script ?? '');
  if (on || !asksEndMail(args)) {
    return { ...args, end_mail: on };
  }
  const lines = script.split('\n');
  const kept = lines[1] === END_MAIL_LINE ? [lines[0], ...lines.slice(2)] : lines;
  return { ...args, end_mail: false, script: kept.join('\n') };
}
