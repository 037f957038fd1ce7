/**
 * The approval card: the preview per kind, each answer, Edit, and the expired and decided states.
 */
import * as React from 'react';
import { act } from 'react';

import {
  ApprovalCard,
  decisionRecord,
  secondApproverLine
} from '../src/components/ApprovalCard';
import { EditingContext, IEditing, RECHECK_DELAY_MS } from '../src/editing';
import { END_MAIL_LINE } from '../src/endMail';
import { withResource } from '../src/sbatch';
import { IApprovalResolved, IPreview } from '../src/events';
import { ApprovalStatus, IApprovalItem } from '../src/transcript';
import { allByTestId, byTestId, click, render, settle, type, useFakeClock } from './render';

const DIGEST = 'sha256:' + 'a'.repeat(64);
const SCRIPT = [
  '#!/bin/bash',
  '#SBATCH --partition=gpu',
  '#SBATCH --gres=gpu:a100:1',
  '',
  '# train the model',
  'srun python train.py --out "$HOME/runs" ${SLURM_JOB_ID}'
].join('\n');

const DIFF = [
  '--- a/wiki/index.md',
  '+++ b/wiki/index.md',
  '@@ -1,2 +1,2 @@',
  ' # Index',
  '-old line',
  '+new line'
].join('\n');

function card(
  preview: Partial<IPreview> = {},
  options: { tier?: 0 | 1 | 2; status?: ApprovalStatus; resolution?: IApprovalResolved | null } = {}
): IApprovalItem {
  return {
    kind: 'approval',
    key: 'approval-a1',
    status: options.status ?? 'pending',
    resolution: options.resolution ?? null,
    request: {
      approval_id: 'a1',
      call_id: 'c1',
      digest: DIGEST,
      tool: 'cluster_submit',
      tier: options.tier ?? 1,
      args: { script: SCRIPT, goal: 'train', name: null },
      reason: 'confirm mode asks for tier 1 once per session',
      task: null,
      preview: {
        kind: 'command',
        title: 'Submit train.sbatch',
        text: 'sbatch --parsable scripts/train.sbatch',
        details: { partition: 'gpu', gpus: 1 },
        facts: [
          { label: 'partition', text: 'gpu', table: null },
          { label: 'gpus', text: '1', table: null }
        ],
        ...preview
      }
    }
  };
}

/** Edit services whose server previews any edit as its script, titled with the time it asks for. */
function fakeEditing() {
  const repreview = jest.fn(async (_id: string, args: Record<string, unknown>): Promise<IPreview> => {
    const minutes = /--time=(\d+)/.exec(String(args.script ?? ''))?.[1];
    return {
      kind: 'script',
      title: `submit to betty-dev: partition gpu, time ${minutes ?? '?'} min`,
      text: String(args.script ?? JSON.stringify(args)),
      details: {}
    };
  });
  const opensEditing = jest.fn((_request: IApprovalItem['request']) => false);
  const editing: IEditing = {
    repreview,
    partitions: jest.fn(async () => ['cpu', 'gpu']),
    editors: null,
    opensEditing
  };
  return Object.assign(editing, { repreview, opensEditing });
}

function renderCard(
  item: IApprovalItem,
  onDecide = jest.fn(),
  editing: IEditing | null = fakeEditing()
) {
  const element = (next: IApprovalItem) => (
    <EditingContext.Provider value={editing}>
      <ApprovalCard item={next} onDecide={onDecide} />
    </EditingContext.Provider>
  );
  const { container, rerender } = render(element(item));
  return { container, onDecide, rerender: (next: IApprovalItem) => rerender(element(next)) };
}

const BUTTONS = ['betty-approve', 'betty-approve-session', 'betty-deny', 'betty-edit'];

describe('ApprovalCard: the preview', () => {
  it('shows the tool, tier, reason and a command in monospace, exactly', () => {
    const { container } = renderCard(card());
    const root = byTestId(container, 'betty-approval-card');
    expect(root.dataset.status).toBe('pending');
    expect(root.dataset.approvalId).toBe('a1');
    expect(root.querySelector('.betty-ApprovalCard-tool')!.textContent).toBe('cluster_submit');
    expect(byTestId(container, 'betty-approval-tier').textContent).toBe('tier 1 · asks once per session');
    expect(root.textContent).toContain('confirm mode asks for tier 1 once per session');
    const preview = byTestId(container, 'betty-preview');
    expect(preview.dataset.kind).toBe('command');
    const code = preview.querySelector('pre > code')!;
    expect(code.textContent).toBe('sbatch --parsable scripts/train.sbatch');
    expect(preview.textContent).toContain('Submit train.sbatch');
    expect(preview.querySelector('dl')!.textContent).toContain('partition');
  });

  it('highlights a script and keeps its text exactly', () => {
    const { container } = renderCard(card({ kind: 'script', text: SCRIPT }));
    const preview = byTestId(container, 'betty-preview');
    expect(preview.dataset.kind).toBe('script');
    const lines = Array.from(preview.querySelectorAll('.betty-Preview-line'));
    expect(lines.map(line => line.textContent)).toEqual(
      SCRIPT.split('\n').map(line => (line === '' ? '\n' : line))
    );
    const directives = preview.querySelectorAll('.betty-hl-directive');
    expect(Array.from(directives).map(d => d.textContent)).toEqual(['#SBATCH', '#SBATCH']);
    expect(preview.querySelector('.betty-hl-comment')!.textContent).toBe('# train the model');
    expect(preview.querySelector('.betty-hl-string')!.textContent).toBe(' --partition=gpu');
    const variables = Array.from(preview.querySelectorAll('.betty-hl-variable')).map(
      v => v.textContent
    );
    expect(variables).toEqual(['${SLURM_JOB_ID}']);
    const strings = Array.from(preview.querySelectorAll('.betty-hl-string')).map(
      s => s.textContent
    );
    expect(strings).toContain('"$HOME/runs"');
  });

  it('colours the added and removed lines of a diff', () => {
    const { container } = renderCard(card({ kind: 'diff', text: DIFF }));
    const lines = Array.from(
      byTestId(container, 'betty-preview').querySelectorAll('.betty-Preview-line')
    );
    expect(
      lines.map(line => [line.textContent, line.className.replace('betty-Preview-line ', '')])
    ).toEqual([
      ['--- a/wiki/index.md', 'betty-diff-file'],
      ['+++ b/wiki/index.md', 'betty-diff-file'],
      ['@@ -1,2 +1,2 @@', 'betty-diff-hunk'],
      [' # Index', 'betty-diff-context'],
      ['-old line', 'betty-diff-removed'],
      ['+new line', 'betty-diff-added']
    ]);
  });

  it('shows text as it is', () => {
    const text = '---\nname: Train\n---\n# Train <b>bold</b>';
    const { container } = renderCard(card({ kind: 'text', text }));
    const preview = byTestId(container, 'betty-preview');
    expect(preview.dataset.kind).toBe('text');
    expect(preview.querySelector('pre.betty-Preview-text')!.textContent).toBe(text);
    expect(preview.querySelector('b')).toBeNull(); // never parsed as HTML
  });
});

describe('ApprovalCard: answers', () => {
  it.each([
    ['betty-approve', 'approved'],
    ['betty-approve-session', 'approved_for_session'],
    ['betty-deny', 'denied']
  ])('%s sends %s', async (button, decision) => {
    const { container, onDecide } = renderCard(card());
    await click(byTestId(container, button));
    expect(onDecide).toHaveBeenCalledTimes(1);
    expect(onDecide).toHaveBeenCalledWith(decision, undefined);
  });

  it('offers no "approve for session" on tier 2, which asks every time', () => {
    const { container } = renderCard(card({}, { tier: 2 }));
    expect(allByTestId(container, 'betty-approve-session')).toHaveLength(0);
    expect(allByTestId(container, 'betty-approve')).toHaveLength(1);
  });

  it('disables the buttons once an answer is on its way, so it is sent once', async () => {
    const onDecide = jest.fn(() => new Promise<void>(() => undefined)); // never answers
    const { container } = renderCard(card(), onDecide);
    await click(byTestId(container, 'betty-approve'));
    await click(byTestId(container, 'betty-approve'));
    await click(byTestId(container, 'betty-deny'));
    expect(onDecide).toHaveBeenCalledTimes(1);
    for (const id of BUTTONS) {
      expect(byTestId<HTMLButtonElement>(container, id).disabled).toBe(true);
    }
  });

  it('shows a refused answer and lets the person answer again', async () => {
    const onDecide = jest.fn().mockRejectedValueOnce(new Error('approval a1 was already answered'));
    const { container } = renderCard(card(), onDecide);
    await click(byTestId(container, 'betty-approve'));
    expect(byTestId(container, 'betty-approval-error').textContent).toBe(
      'approval a1 was already answered'
    );
    expect(byTestId<HTMLButtonElement>(container, 'betty-deny').disabled).toBe(false);
    await click(byTestId(container, 'betty-deny'));
    expect(onDecide).toHaveBeenLastCalledWith('denied', undefined);
  });
});

describe('ApprovalCard: the start estimate', () => {
  it('the card and its buttons come first; the estimate fills in when it is ready, as text', async () => {
    let answer: (line: string) => void = () => undefined;
    const editing = Object.assign(fakeEditing(), {
      startEstimate: jest.fn(() => new Promise<string>(resolve => (answer = resolve)))
    });
    const { container, onDecide } = renderCard(card(), jest.fn(), editing);
    expect(editing.startEstimate).toHaveBeenCalledWith('a1');
    expect(allByTestId(container, 'betty-approval-start')).toHaveLength(0);
    await click(byTestId(container, 'betty-approve'));
    expect(onDecide).toHaveBeenCalledWith('approved', undefined);
    answer('starts ~in 12 min on <img src=x onerror=alert(1)> (a100); ~3 h on gpu (h100)');
    await settle();
    const line = byTestId(container, 'betty-approval-start');
    expect(line.textContent).toBe(
      'starts ~in 12 min on <img src=x onerror=alert(1)> (a100); ~3 h on gpu (h100)'
    );
    expect(line.querySelector('img')).toBeNull();
  });

  it('a failed estimate shows nothing, and a card that submits nothing asks for none', async () => {
    const failing = Object.assign(fakeEditing(), {
      startEstimate: jest.fn(async () => Promise.reject(new Error('no open approval')))
    });
    const { container } = renderCard(card(), jest.fn(), failing);
    await settle();
    expect(allByTestId(container, 'betty-approval-start')).toHaveLength(0);
    expect(byTestId<HTMLButtonElement>(container, 'betty-approve').disabled).toBe(false);
    const other = card();
    other.request = { ...other.request, tool: 'wiki_write' };
    const asked = Object.assign(fakeEditing(), { startEstimate: jest.fn(async () => 'starts now') });
    renderCard(other, jest.fn(), asked);
    expect(asked.startEstimate).not.toHaveBeenCalled();
  });
});

describe('ApprovalCard: Edit', () => {
  useFakeClock();

  it('opens the script with its lines, the resource fields and the goal: no JSON', async () => {
    const { container } = renderCard(card({ details: { cluster: 'betty-dev' } }));
    await click(byTestId(container, 'betty-edit'));
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-script').value).toBe(SCRIPT);
    await settle();
    const partition = byTestId<HTMLSelectElement>(container, 'betty-edit-partition');
    expect(partition.value).toBe('gpu');
    expect(partition.tagName).toBe('SELECT');
    expect(Array.from(partition.options).map(option => option.value)).toEqual(['', 'cpu', 'gpu']);
    expect(byTestId<HTMLInputElement>(container, 'betty-edit-gpus').value).toBe('1');
    expect(byTestId<HTMLInputElement>(container, 'betty-edit-time').value).toBe('');
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-arg-goal').value).toBe('train');
    expect(container.textContent).not.toContain('\\n');
  });

  it("labels each argument in words, not by its name's underscores", async () => {
    const item = card();
    item.request = { ...item.request, tool: 'cluster_cancel', args: { job_id: '42' } };
    const { container } = renderCard(item);
    await click(byTestId(container, 'betty-edit'));
    const names = Array.from(container.querySelectorAll('.betty-ApprovalCard-argumentName'));
    expect(names.map(name => name.textContent)).toEqual(['job id']);
  });

  it('takes focus when it opens, Esc closes it and gives focus back to Edit', async () => {
    const { container } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    const form = byTestId(container, 'betty-edit-form');
    expect(form.contains(document.activeElement)).toBe(true);
    const script = byTestId<HTMLTextAreaElement>(container, 'betty-edit-script');
    act(() => {
      script.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    });
    expect(allByTestId(container, 'betty-edit-form')).toHaveLength(0);
    expect(document.activeElement).toBe(byTestId(container, 'betty-edit'));
  });

  it('Tab in the script indents at the caret; Shift+Tab is left to the browser', async () => {
    const { container } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    const script = byTestId<HTMLTextAreaElement>(container, 'betty-edit-script');
    const at = SCRIPT.indexOf('srun');
    script.setSelectionRange(at, at);
    const tab = new KeyboardEvent('keydown', { key: 'Tab', bubbles: true, cancelable: true });
    act(() => {
      script.dispatchEvent(tab);
    });
    expect(tab.defaultPrevented).toBe(true);
    const value = byTestId<HTMLTextAreaElement>(container, 'betty-edit-script').value;
    expect(value.split('\n')[0]).toBe('#!/bin/bash');
    expect(value).toBe(SCRIPT.slice(0, at) + '  srun' + SCRIPT.slice(at + 4));
    const back = new KeyboardEvent('keydown', { key: 'Tab', shiftKey: true, bubbles: true, cancelable: true });
    act(() => {
      script.dispatchEvent(back);
    });
    expect(back.defaultPrevented).toBe(false);
  });

  it('a field rewrites its #SBATCH line, and editing the line updates the field', async () => {
    const { container } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    type(byTestId<HTMLInputElement>(container, 'betty-edit-mem'), '8G');
    type(byTestId<HTMLInputElement>(container, 'betty-edit-gpus'), '2');
    const script = byTestId<HTMLTextAreaElement>(container, 'betty-edit-script');
    expect(script.value.split('\n').slice(0, 4)).toEqual([
      '#!/bin/bash',
      '#SBATCH --partition=gpu',
      '#SBATCH --gres=gpu:a100:2',
      '#SBATCH --mem=8G'
    ]);
    type(script, script.value.replace('--mem=8G', '--mem=16G'));
    expect(byTestId<HTMLInputElement>(container, 'betty-edit-mem').value).toBe('16G');
  });

  it('Approve edited waits for the preview of exactly this edit, then sends it', async () => {
    const editing = fakeEditing();
    const { container, onDecide } = renderCard(card(), jest.fn(), editing);
    await click(byTestId(container, 'betty-edit'));
    const send = byTestId<HTMLButtonElement>(container, 'betty-edit-send');
    type(byTestId<HTMLInputElement>(container, 'betty-edit-time'), '30');
    expect(send.disabled).toBe(true);
    expect(byTestId(container, 'betty-edit-status').dataset.state).toBe('checking');
    await settle(RECHECK_DELAY_MS);
    const edited = { script: withResource(SCRIPT, 'time', '30'), goal: 'train', name: null };
    expect(editing.repreview).toHaveBeenLastCalledWith('a1', edited);
    expect(send.disabled).toBe(false);
    expect(byTestId(container, 'betty-edit-preview').textContent).toContain('time 30 min');

    type(byTestId<HTMLInputElement>(container, 'betty-edit-time'), '45');
    expect(send.disabled).toBe(true); // the preview shown is of the previous edit
    expect(allByTestId(container, 'betty-edit-preview')).toHaveLength(0);
    await settle(RECHECK_DELAY_MS);
    await click(send);
    expect(onDecide).toHaveBeenCalledTimes(1);
    expect(onDecide).toHaveBeenCalledWith('edited', {
      script: withResource(SCRIPT, 'time', '45'),
      goal: 'train',
      name: null
    });
  });

  it('an edit the server refuses shows its one line and cannot be approved', async () => {
    const editing = fakeEditing();
    editing.repreview.mockRejectedValue(
      new Error("line 2: partition 'gpu-large' does not exist; choose cpu or gpu")
    );
    const { container, onDecide } = renderCard(card(), jest.fn(), editing);
    await click(byTestId(container, 'betty-edit'));
    await settle(RECHECK_DELAY_MS);
    const status = byTestId(container, 'betty-edit-status');
    expect(status.dataset.state).toBe('refused');
    expect(status.getAttribute('role')).toBe('alert');
    expect(status.textContent).toMatch(/partition 'gpu-large' does not exist/);
    const send = byTestId<HTMLButtonElement>(container, 'betty-edit-send');
    expect(send.disabled).toBe(true);
    await click(send);
    expect(onDecide).not.toHaveBeenCalled();
  });

  it('another tool edits each argument in its own field; a bad JSON field is named and not sent', async () => {
    const editing = fakeEditing();
    const item = card({ kind: 'diff', text: DIFF });
    item.request.tool = 'wiki_write';
    item.request.args = { page: 'index.md', body: '# Index\nnew line', frontmatter: { type: 'index' } };
    const { container } = renderCard(item, jest.fn(), editing);
    await click(byTestId(container, 'betty-edit'));
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-arg-body').value).toBe(
      '# Index\nnew line'
    );
    const frontmatter = byTestId<HTMLTextAreaElement>(container, 'betty-edit-arg-frontmatter');
    expect(JSON.parse(frontmatter.value)).toEqual({ type: 'index' });
    type(frontmatter, '{"type": ');
    await settle(RECHECK_DELAY_MS);
    expect(byTestId(container, 'betty-edit-status').textContent).toMatch(/^frontmatter: not a JSON value/);
    expect(editing.repreview).not.toHaveBeenCalled();
    expect(byTestId<HTMLButtonElement>(container, 'betty-edit-send').disabled).toBe(true);
  });

  it('hostile text in the script and in the new preview stays text', async () => {
    const editing = fakeEditing();
    const hostile = `${SCRIPT}\n# <img src=x onerror="alert(1)"> \u001b[31mred\u001b[0m`;
    const item = card();
    item.request.args = { ...item.request.args, script: hostile };
    const { container } = renderCard(item, jest.fn(), editing);
    await click(byTestId(container, 'betty-edit'));
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-script').value).toBe(hostile);
    await settle(RECHECK_DELAY_MS);
    const preview = byTestId(container, 'betty-edit-preview');
    expect(preview.querySelector('img')).toBeNull();
    expect(preview.textContent).toContain('<img src=x onerror="alert(1)">');
    expect(preview.textContent).not.toContain('\u001b');
  });

  it('Cancel leaves the editor without sending', async () => {
    const { container, onDecide } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    await click(byTestId(container, 'betty-edit-cancel'));
    expect(allByTestId(container, 'betty-edit-form')).toHaveLength(0);
    expect(allByTestId(container, 'betty-approve')).toHaveLength(1);
    expect(onDecide).not.toHaveBeenCalled();
  });

  it('a card asked for with Resubmit… opens in the editor', () => {
    const editing = fakeEditing();
    editing.opensEditing.mockReturnValue(true);
    const { container } = renderCard(card(), jest.fn(), editing);
    expect(allByTestId(container, 'betty-edit-form')).toHaveLength(1);
    expect(editing.opensEditing).toHaveBeenCalledWith(expect.objectContaining({ call_id: 'c1' }));
  });

  it('offers no Edit where nothing can check an edit', () => {
    const { container } = renderCard(card(), jest.fn(), null);
    expect(allByTestId(container, 'betty-edit')).toHaveLength(0);
    expect(allByTestId(container, 'betty-approve')).toHaveLength(1);
  });

  it('a decided edit shows each argument with its lines, not escaped JSON', () => {
    const resolution: IApprovalResolved = {
      approval_id: 'a1',
      call_id: 'c1',
      decision: 'edited',
      approver: 'alice (side panel)',
      args: { script: SCRIPT, goal: 'train' }
    };
    const { container } = renderCard(card({}, { status: 'decided', resolution }));
    const shown = byTestId(container, 'betty-edited-args');
    expect(shown.textContent).toContain(SCRIPT);
    expect(shown.textContent).not.toContain('\\n');
  });
});

describe('ApprovalCard: expired and decided', () => {
  it('an expired card says so and its buttons are disabled', async () => {
    const { container, onDecide } = renderCard(card({}, { status: 'expired' }));
    expect(byTestId(container, 'betty-approval-card').dataset.status).toBe('expired');
    expect(byTestId(container, 'betty-approval-expired').textContent).toMatch(
      /connection .* dropped/
    );
    for (const id of BUTTONS) {
      const button = byTestId<HTMLButtonElement>(container, id);
      expect(button.disabled).toBe(true);
      await click(button);
    }
    expect(onDecide).not.toHaveBeenCalled();
    expect(allByTestId(container, 'betty-edit-form')).toHaveLength(0);
  });

  it('a pending card that expires while being edited can no longer send', async () => {
    const onDecide = jest.fn();
    const { container, rerender } = renderCard(card(), onDecide);
    await click(byTestId(container, 'betty-edit'));
    rerender(card({}, { status: 'expired' }));
    expect(allByTestId(container, 'betty-edit-send')).toHaveLength(0);
    expect(byTestId<HTMLButtonElement>(container, 'betty-approve').disabled).toBe(true);
  });

  it('a decided card folds into a one-line record with no buttons', () => {
    const resolution: IApprovalResolved = {
      approval_id: 'a1',
      call_id: 'c1',
      decision: 'approved',
      approver: 'alice',
      args: null
    };
    const { container } = renderCard(card({}, { status: 'decided', resolution }));
    const record = byTestId(container, 'betty-approval-record');
    expect(record.textContent).toContain('cluster_submit approved by alice');
    expect(record.dataset.decision).toBe('approved');
    for (const id of BUTTONS) {
      expect(allByTestId(container, id)).toHaveLength(0);
    }
    const details = record.parentElement as HTMLDetailsElement;
    expect(details.tagName).toBe('DETAILS');
    expect(details.open).toBe(false);
  });

  it.each([
    ['approved', 'bob', 'approved by bob'],
    ['approved_for_session', 'bob', 'approved for this session by bob'],
    ['edited', 'bob', 'edited and approved by bob'],
    ['denied', 'bob', 'denied by bob'],
    ['timed_out', null, 'timed out: nobody answered in time'],
    ['denied', null, 'denied']
  ])('the record of %s by %s reads "%s"', (decision, approver, text) => {
    expect(decisionRecord(decision, approver)).toBe(text);
  });
});

describe('ApprovalCard: e-mail me when it ends', () => {
  it('ticking it checks the edit again, shows the new script and approves it as edited', async () => {
    const editing = fakeEditing();
    const { container, onDecide } = renderCard(card({}, { tier: 2 }), jest.fn(), editing);
    const box = byTestId<HTMLInputElement>(container, 'betty-end-mail');
    expect(box.checked).toBe(false);
    await click(box);
    await settle();
    const asked = { script: SCRIPT, goal: 'train', name: null, end_mail: true };
    expect(editing.repreview).toHaveBeenCalledWith('a1', asked);
    expect(box.checked).toBe(true);
    await click(byTestId(container, 'betty-approve'));
    expect(onDecide).toHaveBeenCalledWith('edited', asked);
  });

  it('approve waits while the edit is checked, and a refused one says why and holds approve back', async () => {
    const editing = fakeEditing();
    let refuse: (reason: Error) => void = () => undefined;
    editing.repreview.mockImplementation(
      () => new Promise<IPreview>((_, reject) => (refuse = reject))
    );
    const { container, onDecide } = renderCard(card({}, { tier: 2 }), jest.fn(), editing);
    await click(byTestId(container, 'betty-end-mail'));
    expect(byTestId<HTMLButtonElement>(container, 'betty-approve').disabled).toBe(true);
    await act(async () => refuse(new Error('your site does not offer Slurm end mail')));
    expect(byTestId(container, 'betty-end-mail-problem').textContent).toBe(
      'your site does not offer Slurm end mail'
    );
    expect(byTestId<HTMLButtonElement>(container, 'betty-approve').disabled).toBe(true);
    // Untick: the card is as the model asked again, approved as it is.
    await click(byTestId(container, 'betty-end-mail'));
    expect(allByTestId(container, 'betty-end-mail-problem')).toHaveLength(0);
    await click(byTestId(container, 'betty-approve'));
    expect(onDecide).toHaveBeenCalledWith('approved', undefined);
  });

  it('unticking a card that asked for it takes out the line Betty added, not the script own', async () => {
    const editing = fakeEditing();
    const asked = card({}, { tier: 2 });
    const withMail = SCRIPT.replace('#!/bin/bash\n', `#!/bin/bash\n${END_MAIL_LINE}\n`);
    asked.request = { ...asked.request, args: { ...asked.request.args, script: withMail, end_mail: true } };
    const { container, onDecide } = renderCard(asked, jest.fn(), editing);
    const box = byTestId<HTMLInputElement>(container, 'betty-end-mail');
    expect(box.checked).toBe(true);
    await click(box);
    await settle();
    await click(byTestId(container, 'betty-approve'));
    expect(onDecide).toHaveBeenCalledWith('edited', {
      script: SCRIPT,
      goal: 'train',
      name: null,
      end_mail: false
    });
  });

  it('is not offered on a card a second approver must see as it is, nor without edit services', () => {
    const second = card({ details: { 'second approver': 'above your site limits' } }, { tier: 2 });
    expect(allByTestId(renderCard(second).container, 'betty-end-mail')).toHaveLength(0);
    expect(allByTestId(renderCard(card(), jest.fn(), null).container, 'betty-end-mail')).toHaveLength(0);
  });
});

describe('ApprovalCard: a second approver', () => {
  const approved: IApprovalResolved = {
    approval_id: 'a1',
    call_id: 'c1',
    decision: 'approved',
    approver: 'ada',
    args: null
  };
  const since = new Date(2026, 10, 29, 14, 2).getTime() / 1000;

  it('says whom an approved card waits for since when, then how they answered', () => {
    const item = { ...card({}, { status: 'decided', resolution: approved }) };
    const today = new Date();
    today.setHours(14, 2, 0, 0); // a time today: the card shows the clock time alone
    const waiting = {
      approval_id: 'a1',
      call_id: 'c1',
      state: 'waiting' as const,
      approvers: ['hpcadmin', 'ops'],
      since: today.getTime() / 1000,
      approver: null,
      why: ''
    };
    const { container, rerender } = renderCard({ ...item, second: waiting });
    const line = byTestId(container, 'betty-second-approver');
    expect(line.dataset.state).toBe('waiting');
    expect(line.textContent).toMatch(
      /waiting for a second approver \(hpcadmin or ops\) since (14:02|0?2:02 PM)/
    );
    rerender({ ...item, second: { ...waiting, state: 'approved', approver: 'ops' } });
    expect(byTestId(container, 'betty-second-approver').textContent).toContain(
      'approved by ops (second approver)'
    );
    rerender({
      ...item,
      second: { ...waiting, state: 'denied', approver: 'ops', why: 'the second approver ops denied it' }
    });
    expect(byTestId(container, 'betty-second-approver').textContent).toContain(
      'not run: the second approver ops denied it'
    );
  });

  it('words each state in one line', () => {
    const base = {
      approval_id: 'a1',
      call_id: 'c1',
      approvers: ['hpcadmin'],
      since,
      approver: null,
      why: ''
    };
    const now = new Date(since * 1000);
    expect(secondApproverLine({ ...base, state: 'waiting' }, now)).toMatch(
      /^waiting for a second approver \(hpcadmin\) since \S+/
    );
    expect(
      secondApproverLine({ ...base, state: 'refused', why: 'no second approver answered within 600 s' }, now)
    ).toBe('not run: no second approver answered within 600 s');
    const later = new Date(now.getTime() + 3 * 86400 * 1000);
    expect(secondApproverLine({ ...base, state: 'waiting' }, later)).toMatch(/since Nov 29/);
  });
});
