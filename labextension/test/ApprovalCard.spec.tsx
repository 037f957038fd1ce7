/**
 * The approval card: the preview per kind, each answer, Edit, and the expired and decided states.
 */
import * as React from 'react';

import { ApprovalCard, decisionRecord, parseArgs } from '../src/components/ApprovalCard';
import { IApprovalResolved, IPreview } from '../src/events';
import { ApprovalStatus, IApprovalItem } from '../src/transcript';
import { allByTestId, byTestId, click, render, type } from './render';

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
        ...preview
      }
    }
  };
}

function renderCard(item: IApprovalItem, onDecide = jest.fn()) {
  const { container, rerender } = render(<ApprovalCard item={item} onDecide={onDecide} />);
  return { container, onDecide, rerender };
}

const BUTTONS = ['betty-approve', 'betty-approve-session', 'betty-deny', 'betty-edit'];

describe('ApprovalCard: the preview', () => {
  it('shows the tool, tier, reason and a command in monospace, exactly', () => {
    const { container } = renderCard(card());
    const root = byTestId(container, 'betty-approval-card');
    expect(root.dataset.status).toBe('pending');
    expect(root.dataset.approvalId).toBe('a1');
    expect(root.querySelector('.betty-ApprovalCard-tool')!.textContent).toBe('cluster_submit');
    expect(byTestId(container, 'betty-approval-tier').textContent).toBe('tier 1');
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

describe('ApprovalCard: Edit', () => {
  it('opens the arguments as JSON and sends the edited arguments', async () => {
    const { container, onDecide } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    const editor = byTestId<HTMLTextAreaElement>(container, 'betty-edit-args');
    expect(JSON.parse(editor.value)).toEqual({ script: SCRIPT, goal: 'train', name: null });
    type(editor, JSON.stringify({ script: SCRIPT, goal: 'train longer', name: 'long' }));
    await click(byTestId(container, 'betty-edit-send'));
    expect(onDecide).toHaveBeenCalledTimes(1);
    expect(onDecide).toHaveBeenCalledWith('edited', {
      script: SCRIPT,
      goal: 'train longer',
      name: 'long'
    });
  });

  it.each([
    ['invalid JSON', '{"goal": "train",', /not valid JSON/],
    ['a list', '[1, 2]', /must be a JSON object/],
    ['null', 'null', /must be a JSON object/],
    ['a string', '"train"', /must be a JSON object/]
  ])('%s shows an error and sends nothing', async (_name, text, message) => {
    const { container, onDecide } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    type(byTestId<HTMLTextAreaElement>(container, 'betty-edit-args'), text);
    await click(byTestId(container, 'betty-edit-send'));
    expect(onDecide).not.toHaveBeenCalled();
    expect(byTestId(container, 'betty-approval-error').textContent).toMatch(message);
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-edit-args').value).toBe(text);
  });

  it('Cancel leaves the editor without sending', async () => {
    const { container, onDecide } = renderCard(card());
    await click(byTestId(container, 'betty-edit'));
    await click(byTestId(container, 'betty-edit-cancel'));
    expect(allByTestId(container, 'betty-edit-args')).toHaveLength(0);
    expect(allByTestId(container, 'betty-approve')).toHaveLength(1);
    expect(onDecide).not.toHaveBeenCalled();
  });

  it('parseArgs keeps an object as it is', () => {
    expect(parseArgs('{"job_id": "42", "n": [1]}')).toEqual({ job_id: '42', n: [1] });
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
    expect(allByTestId(container, 'betty-edit-args')).toHaveLength(0);
  });

  it('a pending card that expires while being edited can no longer send', async () => {
    const onDecide = jest.fn();
    const { container, rerender } = renderCard(card(), onDecide);
    await click(byTestId(container, 'betty-edit'));
    rerender(<ApprovalCard item={card({}, { status: 'expired' })} onDecide={onDecide} />);
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
