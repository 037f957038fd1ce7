/**
 * The chat view: transcript rows, assistant markdown, send and stop.
 */
import * as React from 'react';

import { ChatView, compactArgs, IChatViewProps } from '../src/components/ChatView';
import { emptyTranscript, ITranscript, reduce } from '../src/transcript';
import { allByTestId, byTestId, click, render, type } from './render';

function transcript(frames: [string, unknown][]): ITranscript {
  return frames.reduce(
    (state, [type, payload], i) =>
      reduce(state, { type, session_id: 's', seq: i + 1, ts: 0, payload }),
    emptyTranscript('s')
  );
}

function props(state: ITranscript, overrides: Partial<IChatViewProps> = {}): IChatViewProps {
  return {
    transcript: state,
    hasModel: true,
    onSend: jest.fn(),
    onStop: jest.fn(),
    onDecide: jest.fn(),
    onOpen: jest.fn(),
    ...overrides
  };
}

const TURN = transcript([
  ['message', { role: 'user', text: 'what runs?', model: null }],
  ['message', { role: 'assistant', text: 'Looking at **the queue**.', model: null }],
  ['tool_call', { call_id: 'c1', tool: 'cluster_queue', args: { user: 'alice' }, tier: 1 }],
  [
    'tool_result',
    {
      call_id: 'c1',
      tool: 'cluster_queue',
      ok: true,
      decision: 'approved',
      approver: 'alice (side panel)',
      summary: '2 jobs',
      duration_ms: 40,
      output_ref: null,
      artifacts: []
    }
  ]
]);

describe('ChatView', () => {
  it('renders messages, and assistant markdown as elements', () => {
    const { container } = render(<ChatView {...props(TURN)} />);
    expect(byTestId(container, 'betty-message-user').textContent).toBe('what runs?');
    const assistant = byTestId(container, 'betty-message-assistant');
    expect(assistant.textContent).toBe('Looking at the queue.');
    expect(assistant.querySelector('strong')!.textContent).toBe('the queue');
  });

  it("shows the chip a person's message went with under their words, never the model's envelope", () => {
    const context = {
      notebook: 'analysis/train.ipynb',
      cell: 1,
      directory: 'analysis',
      branch: 'main',
      dirty: false,
      errors: []
    };
    const state = transcript([['message', { role: 'user', text: 'what runs?', model: null, context }]]);
    const { container } = render(<ChatView {...props(state)} />);
    expect(byTestId(container, 'betty-message-user').textContent).toBe('what runs?');
    const chip = byTestId(container, 'betty-message-context');
    expect(Array.from(chip.querySelectorAll('li')).map(li => li.textContent)).toEqual([
      'analysis/train.ipynb, cell 1',
      'folder analysis',
      'git main (clean)'
    ]);
    expect(container.textContent).not.toContain('[context from');
  });

  it('shows HTML in a reply as text, never as HTML', () => {
    const state = transcript([
      ['message', { role: 'assistant', text: '<img src=x onerror=alert(1)>', model: null }]
    ]);
    const { container } = render(<ChatView {...props(state)} />);
    const message = byTestId(container, 'betty-message-assistant');
    expect(message.textContent).toBe('<img src=x onerror=alert(1)>');
    expect(message.querySelector('img')).toBeNull();
  });

  it('names the model under each assistant message that says which, as text', () => {
    const state = transcript([
      ['message', { role: 'assistant', text: 'Plan:\n1. cluster_queue', model: 'planner <b>70B</b>' }],
      ['message', { role: 'assistant', text: 'One job runs.', model: 'qwen2.5-1.5b' }],
      ['message', { role: 'assistant', text: 'No model named.', model: null }]
    ]);
    const { container } = render(<ChatView {...props(state)} />);
    const names = allByTestId(container, 'betty-message-model');
    expect(names.map(name => name.textContent)).toEqual(['planner <b>70B</b>', 'qwen2.5-1.5b']);
    expect(names[0].querySelector('b')).toBeNull();
  });

  it('shows a tool call and its result as one compact row', () => {
    const { container } = render(<ChatView {...props(TURN)} />);
    const rows = allByTestId(container, 'betty-tool-row');
    expect(rows).toHaveLength(1);
    expect(rows[0].dataset.state).toBe('ok');
    expect(rows[0].querySelector('summary')!.textContent).toContain(
      'cluster_queue user=alice — 2 jobs'
    );
    expect((rows[0] as HTMLDetailsElement).open).toBe(false);
  });

  it('shows the headline of a table summary on the row, the table and arguments when unfolded', () => {
    const table = ' job_id  name  state\n     12  <b>x</b>  RUNNING';
    const state = transcript([
      [
        'tool_call',
        {
          call_id: 'c2',
          tool: 'cluster_queue',
          args: { user: 'alice', states: ['RUNNING'], '\u202eevil': 'x' },
          tier: 1
        }
      ],
      [
        'tool_result',
        {
          call_id: 'c2',
          tool: 'cluster_queue',
          ok: true,
          decision: 'auto',
          approver: null,
          summary: `1 job(s): 1 RUNNING\n${table}\n`,
          duration_ms: 1234,
          output_ref: null,
          artifacts: []
        }
      ]
    ]);
    const { container } = render(<ChatView {...props(state)} />);
    const row = byTestId(container, 'betty-tool-row');
    expect(row.querySelector('summary')!.textContent).toBe(
      '✓ cluster_queue user=alice, states=["RUNNING"], \\u202eevil=x — 1 job(s): 1 RUNNING'
    );
    expect(byTestId(row, 'betty-tool-table').textContent).toBe(table);
    expect(row.querySelector('b')).toBeNull();
    const names = Array.from(row.querySelectorAll('dt')).map(each => each.textContent);
    const values = Array.from(row.querySelectorAll('dd')).map(each => each.textContent);
    expect(names).toEqual(['user', 'states', '\\u202eevil']);
    expect(values).toEqual(['alice', '["RUNNING"]', 'x']);
    expect(row.textContent).toContain('took 1.2 s');
  });

  it('sends the prompt and clears the box; Stop is for a busy turn', async () => {
    const p = props(transcript([]));
    const { container, rerender } = render(<ChatView {...p} />);
    expect(byTestId<HTMLButtonElement>(container, 'betty-stop').disabled).toBe(true);
    const box = byTestId<HTMLTextAreaElement>(container, 'betty-prompt');
    type(box, '  how much memory does llama-3-8b need?  ');
    await click(byTestId(container, 'betty-send'));
    expect(p.onSend).toHaveBeenCalledWith('how much memory does llama-3-8b need?', null);
    expect(box.value).toBe('');

    const busy = transcript([['message', { role: 'user', text: 'hi', model: null }]]);
    rerender(<ChatView {...p} transcript={busy} />);
    expect(byTestId(container, 'betty-working')).toBeTruthy();
    await click(byTestId(container, 'betty-stop'));
    expect(p.onStop).toHaveBeenCalledTimes(1);
  });

  it('keeps the prompt and shows why when it could not be sent', async () => {
    const p = props(transcript([]), {
      onSend: jest.fn().mockRejectedValue(new Error('no session'))
    });
    const { container } = render(<ChatView {...p} />);
    type(byTestId<HTMLTextAreaElement>(container, 'betty-prompt'), 'hello');
    await click(byTestId(container, 'betty-send'));
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-prompt').value).toBe('hello');
    expect(container.querySelector('[role="alert"]')!.textContent).toBe('no session');
  });

  it('passes an approval card answer on with its approval id and the digest of the card', async () => {
    const state = transcript([
      [
        'approval_request',
        {
          approval_id: 'a7',
          call_id: 'c7',
          tool: 'cluster_cancel',
          tier: 2,
          args: { job_id: '42' },
          preview: { kind: 'command', title: 'Cancel', text: 'scancel 42', details: {} },
          reason: 'tier 2',
          task: null,
          digest: `sha256:${'7'.repeat(64)}`
        }
      ]
    ]);
    const p = props(state);
    const { container } = render(<ChatView {...p} />);
    await click(byTestId(container, 'betty-deny'));
    expect(p.onDecide).toHaveBeenCalledWith('a7', 'denied', undefined, `sha256:${'7'.repeat(64)}`);
  });

  describe('a card that arrives', () => {
    const CARD = transcript([
      ['message', { role: 'user', text: 'submit it', model: null }],
      [
        'approval_request',
        {
          approval_id: 'a9',
          call_id: 'c9',
          tool: 'cluster_submit',
          tier: 2,
          args: {},
          preview: { kind: 'script', title: 'submit', text: '#!/bin/bash', details: {} },
          reason: 'tier 2',
          task: null,
          digest: `sha256:${'7'.repeat(64)}`
        }
      ]
    ]);
    const BEFORE = transcript([['message', { role: 'user', text: 'submit it', model: null }]]);

    it('takes focus to its Approve button from the panel or an empty prompt', () => {
      const { container, rerender } = render(<ChatView {...props(BEFORE)} />);
      byTestId<HTMLTextAreaElement>(container, 'betty-prompt').focus();
      rerender(<ChatView {...props(CARD)} />);
      expect(document.activeElement).toBe(byTestId(container, 'betty-approve'));
    });

    it('does not move focus to an older card once the newest is answered', () => {
      const request = (id: string) => [
        'approval_request',
        {
          approval_id: id,
          call_id: `c-${id}`,
          tool: 'cluster_cancel',
          tier: 2,
          args: {},
          preview: { kind: 'command', title: 'cancel', text: 'scancel 1', details: {} },
          reason: 'tier 2',
          task: null,
          digest: `sha256:${'7'.repeat(64)}`
        }
      ];
      const frames = [request('a8'), request('a9')] as [string, unknown][];
      const answer = {
        approval_id: 'a9',
        call_id: 'c-a9',
        decision: 'denied',
        approver: 'ada',
        args: null
      };
      const { container, rerender } = render(<ChatView {...props(transcript(frames))} />);
      const card = (id: string) =>
        container.querySelector(`[data-approval-id="${id}"]`) as HTMLElement;
      expect(document.activeElement).toBe(byTestId(card('a9'), 'betty-approve'));
      (document.activeElement as HTMLElement).blur();
      const answered = transcript([...frames, ['approval_resolved', answer]]);
      rerender(<ChatView {...props(answered)} />);
      expect(card('a9').dataset.status).toBe('decided');
      expect(document.activeElement).toBe(document.body);
    });

    it('leaves focus where someone types: a prompt with text, or a field outside the panel', () => {
      const { container, rerender } = render(<ChatView {...props(BEFORE)} />);
      const prompt = byTestId<HTMLTextAreaElement>(container, 'betty-prompt');
      type(prompt, 'and then');
      prompt.focus();
      rerender(<ChatView {...props(CARD)} />);
      expect(document.activeElement).toBe(prompt);

      const outside = document.createElement('input');
      document.body.appendChild(outside);
      const second = render(<ChatView {...props(BEFORE)} />);
      outside.focus();
      second.rerender(<ChatView {...props(CARD)} />);
      expect(document.activeElement).toBe(outside);
      outside.remove();
    });
  });

  it('compactArgs writes arguments in one short line', () => {
    expect(compactArgs({ job_id: '42', lines: 50 })).toBe('job_id=42, lines=50');
    expect(compactArgs({ model: 'x', precision: null })).toBe('model=x');
    expect(compactArgs({ script: 'x'.repeat(200) }, 20)).toHaveLength(20);
  });

  it('without a model says what to set, in which file, the restart and the page, and sends nothing', () => {
    const onSend = jest.fn();
    const setup = {
      setting: '{"BettyConfig": {"llm": {"model": "<b>x</b>"}}}',
      config_file: '/home/ada/.jupyter/jupyter_server_config.d/betty_llm.json\u202e',
      restart: true,
      docs: 'docs/llm.md',
      docs_url: 'betty/api/docs/llm'
    };
    const { container } = render(
      <ChatView
        {...props(TURN, { hasModel: false, modelSetup: setup, baseUrl: '/user/ada/', onSend })}
      />
    );
    const box = byTestId(container, 'betty-no-model');
    expect(byTestId(container, 'betty-no-model-file').textContent).toBe(
      '/home/ada/.jupyter/jupyter_server_config.d/betty_llm.json\\u202e'
    );
    expect(byTestId(container, 'betty-no-model-setting').textContent).toBe(setup.setting);
    expect(box.querySelector('b')).toBeNull();
    expect(box.textContent).toContain('then restart JupyterLab');
    const link = byTestId<HTMLAnchorElement>(container, 'betty-no-model-docs');
    expect(link.getAttribute('href')).toBe('/user/ada/betty/api/docs/llm');
    expect(link.rel).toContain('noopener');
    const prompt = byTestId<HTMLTextAreaElement>(container, 'betty-prompt');
    const send = byTestId<HTMLButtonElement>(container, 'betty-send');
    expect(prompt.disabled && send.disabled).toBe(true);
    type(prompt, 'hello');
    click(send);
    expect(onSend).not.toHaveBeenCalled();
  });

  it("names the offline demo model in its welcome, and only that model", () => {
    const empty = transcript([]);
    const demo = render(
      <ChatView {...props(empty, { modelName: 'betty-demo (offline demo model, not an LLM)' })} />
    );
    expect(byTestId(demo.container, 'betty-demo-model').textContent).toContain('offline demo model');
    const real = render(<ChatView {...props(empty, { modelName: 'qwen2.5:14b' })} />);
    expect(allByTestId(real.container, 'betty-demo-model')).toHaveLength(0);
  });
});
