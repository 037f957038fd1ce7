/**
 * Bringing a new approval card to the person: scrolled into its list so that its buttons show,
 * and, for a card of the person's own chat, its Approve button focused — but only where that
 * cannot catch someone's typing: a key pressed on a focused button presses it, so focus moves
 * only from nowhere, from the panel itself, or from the panel's empty prompt box, never from a
 * notebook, an editor or a field with text in it. Another session's card (an MCP client's, an
 * automation's) comes unasked, and takes no focus.
 */

/** Room left under the card's buttons, in pixels. */
const MARGIN = 8;

/**
 * Scroll `container` (the card's scrolling list) so `card` shows whole when it fits, else its
 * buttons at the bottom; then, given the `panel` it is in, focus its Approve button if that
 * steals no one's keys.
 */
export function revealCard(container: HTMLElement, card: HTMLElement, panel?: HTMLElement): void {
  const buttons = card.querySelector<HTMLElement>('[data-testid="betty-approve"]')?.parentElement;
  const box = container.getBoundingClientRect();
  const top = card.getBoundingClientRect().top - box.top + container.scrollTop;
  const end = (buttons ?? card).getBoundingClientRect().bottom - box.top + container.scrollTop;
  const view = container.clientHeight;
  if (end - top + MARGIN <= view) {
    // All of it fits: scroll only as far as needed to show it whole.
    container.scrollTop = Math.min(Math.max(container.scrollTop, end + MARGIN - view), top);
  } else {
    container.scrollTop = Math.max(0, end + MARGIN - view);
  }
  const approve = card.querySelector<HTMLButtonElement>('[data-testid="betty-approve"]');
  if (panel && approve && !approve.disabled && mayTakeFocus(panel)) {
    approve.focus({ preventScroll: true });
  }
}

/** Whether focus may move into the panel now: nobody is typing anywhere, nor working elsewhere. */
export function mayTakeFocus(panel: HTMLElement): boolean {
  const active = panel.ownerDocument.activeElement as HTMLElement | null;
  if (active === null || active === panel.ownerDocument.body) {
    return true;
  }
  if (!panel.contains(active)) {
    return false;
  }
  if (active.isContentEditable || active.tagName === 'INPUT' || active.tagName === 'SELECT') {
    return false;
  }
  return active.tagName !== 'TEXTAREA' || (active as HTMLTextAreaElement).value === '';
}
