/**
 * The chats kept on the chat's cluster, to reopen an earlier one: each named by its first
 * question and when it started. Reopening one replays its transcript; switching the cluster
 * away and back reopens that cluster's latest chat.
 */
import * as React from 'react';

import { IChatEntry } from '../model';
import { visibleText } from '../safe';

/** Props of {@link ChatList}. */
export interface IChatListProps {
  /** Every kept chat, newest first. */
  chats: IChatEntry[];
  /** The chat's cluster: only its chats are offered. */
  cluster: string | null;
  /** The chat open now. */
  current: string | null;
  onOpen: (sessionId: string) => void;
}

/** A chat's name in the list: its first question, or that it has none yet. */
export function chatName(chat: IChatEntry): string {
  const title = chat.title.length > 60 ? `${chat.title.slice(0, 60)}…` : chat.title;
  const at = new Date(chat.started);
  const two = (n: number) => String(n).padStart(2, '0');
  const when = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${two(at.getHours())}:${two(at.getMinutes())}`;
  return `${title === '' ? '(nothing asked yet)' : title} · ${when}`;
}

/** The picker of this cluster's chats; nothing while there is no earlier chat to go back to. */
export function ChatList({ chats, cluster, current, onOpen }: IChatListProps): JSX.Element | null {
  const mine = chats.filter(chat => chat.cluster === cluster);
  if (mine.length < 2 && mine.every(chat => chat.session_id === current)) {
    return null;
  }
  return (
    <label className="betty-ChatList">
      <span>Chats on {visibleText(cluster ?? '')}</span>
      <select
        data-testid="betty-chats"
        title="Reopen an earlier chat on this cluster; its transcript comes back"
        value={current ?? ''}
        onChange={event => onOpen(event.target.value)}
      >
        {mine.map(chat => (
          <option key={chat.session_id} value={chat.session_id}>
            {visibleText(chatName(chat))}
          </option>
        ))}
      </select>
    </label>
  );
}
