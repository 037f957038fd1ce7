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
 * steals no one's keys. What arrives in the card after it (a submission's start estimate) grows
 * it and pushes its buttons down, so it is scrolled again as it grows, until the person scrolls
 * the list themselves; the function returned stops that (call it once the card is answered).
 */
export function revealCard(container: HTMLElement, card: HTMLElement, panel?: HTMLElement): () => void {
  showWhole(container, card);
  const approve = card.querySelector<HTMLButtonElement>('[data-testid="betty-approve"]');
  if (panel && approve && !approve.disabled && mayTakeFocus(panel)) {
    approve.focus({ preventScroll: true });
  }
  return followGrowth(container, card);
}

/** Scroll `container` so `card` shows whole when it fits, else its buttons at the bottom. */
function showWhole(container: HTMLElement, card: HTMLElement): void {
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
}

/**
 * Show `card` whole again each time it (or its list) changes size, for as long as the list stays
 * where Betty put it: a scroll of the person's own ends it. Returns the function that ends it.
 */
function followGrowth(container: HTMLElement, card: HTMLElement): () => void {
  if (typeof ResizeObserver === 'undefined') {
    return () => undefined;
  }
  let placed = container.scrollTop;
  const observer = new ResizeObserver(() => {
    showWhole(container, card);
    placed = container.scrollTop;
  });
  const stop = (): void => {
    observer.disconnect();
    container.removeEventListener('scroll', moved);
  };
  const moved = (): void => {
    if (Math.abs(container.scrollTop - placed) > 1) {
      stop(); // the person scrolled: the list is theirs now
    }
  };
  observer.observe(card);
  observer.observe(container);
  container.addEventListener('scroll', moved, { passive: true });
  return stop;
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
