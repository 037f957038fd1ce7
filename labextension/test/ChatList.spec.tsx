/**
 * The kept chats of the chat's cluster: each named by its first question (hostile text stays
 * text), choosing one reopens it; nothing is shown while there is no other chat to go back to.
 */
import * as React from 'react';
import { act } from 'react';

import { ChatList } from '../src/components/ChatList';
import { IChatEntry } from '../src/model';
import { byTestId, render } from './render';

const HOSTILE = '<img src=x onerror="window.__pwned=1">';

const CHATS: IChatEntry[] = [
  { session_id: 's-3', cluster: 'dev', title: '', started: Date.UTC(2026, 0, 2, 9, 0) },
  { session_id: 's-2', cluster: 'big', title: 'on big', started: Date.UTC(2026, 0, 1, 10, 0) },
  { session_id: 's-1', cluster: 'dev', title: `why is it pending ${HOSTILE}`, started: Date.UTC(2026, 0, 1, 9, 0) }
];

describe('ChatList', () => {
  it("lists the cluster's chats newest first and reopens the one chosen", () => {
    const onOpen = jest.fn();
    const { container } = render(<ChatList chats={CHATS} cluster="dev" current="s-3" onOpen={onOpen} />);
    const select = byTestId<HTMLSelectElement>(container, 'betty-chats');
    expect(Array.from(select.options).map(option => option.value)).toEqual(['s-3', 's-1']);
    expect(select.value).toBe('s-3');
    expect(select.options[0].textContent).toMatch(/^\(nothing asked yet\) · 2026-01-0\d \d\d:\d\d$/);
    expect(select.options[1].textContent).toContain(`why is it pending ${HOSTILE}`);
    expect(container.querySelector('img')).toBeNull();
    act(() => {
      select.value = 's-1';
      select.dispatchEvent(new Event('change', { bubbles: true }));
    });
    expect(onOpen).toHaveBeenCalledWith('s-1');
  });

  it('shows nothing while the open chat is the only one of its cluster', () => {
    const { container } = render(
      <ChatList chats={CHATS} cluster="big" current="s-2" onOpen={jest.fn()} />
    );
    expect(container.querySelector('[data-testid="betty-chats"]')).toBeNull();
  });
});
