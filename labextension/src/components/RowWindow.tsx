/**
 * A long list scrolled as one: only the rows in view (and a few either side) are in the page,
 * with room above and below them as tall as the rows left out, so the scrollbar spans the
 * whole list. A person with 20,000 jobs scrolls through all of them with about thirty rows
 * in the page at any time.
 *
 * Every row is as tall as the first one shown (the stylesheet gives the rows one height;
 * {@link useRowWindow} measures it). A row that had keyboard focus and scrolls out of the
 * page hands focus to the scrolling list, so the keys go on scrolling it. A list in a tab the
 * person left is where they left it when they come back.
 */
import * as React from 'react';

/** Options of {@link useRowWindow}. */
export interface IRowWindowOptions {
  /** A row's height in pixels until one is measured (and where nothing is laid out). */
  rowHeight: number;
  /** How many rows to keep in the page beyond each edge of the view. */
  overscan?: number;
  /** Back to the top of the list when this changes (a filter chosen). */
  from?: unknown;
  /** How many rows the list shows at least, when it has them, however short the tab. */
  least?: number;
}

/** Which rows of a list are in the page, and what to put around them. */
export interface IRowWindow {
  /** The first row in the page (from 0). */
  first: number;
  /** One past the last row in the page. */
  end: number;
  /** Pixels of room above the first row and below the last. */
  before: number;
  after: number;
  /** The least height of the scrolling list, in pixels: {@link IRowWindowOptions.least} rows and what is above them. */
  leastHeight: number;
  /** The scrolling element. */
  scroller: React.RefCallback<HTMLElement>;
  /** The element the rows start in (a table's body, a list); rows above it are not counted. */
  rows: React.RefCallback<HTMLElement>;
  /** The scrolling element's `onScroll`. */
  onScroll: () => void;
  /** The scrolling element's `onFocus`: which row holds focus, to hand it on when the row goes. */
  onFocus: (event: React.FocusEvent) => void;
}

/** How tall the view is taken to be where nothing is laid out (a test's page, before layout). */
const UNLAID_VIEW = 800;

interface IView {
  /** Pixels of the list scrolled past (from the first row). */
  top: number;
  height: number;
  rowHeight: number;
  /** Pixels above the first row in the scrolling element (a table's column names). */
  offset: number;
}

/**
 * The window of a list of `count` rows that shows in its scrolling element: the rows in view
 * and `overscan` more on each side, recomputed on scroll, on resize and when the list changes.
 */
export function useRowWindow(count: number, options: IRowWindowOptions): IRowWindow {
  const { rowHeight: guess, overscan = 8, from = null, least = 4 } = options;
  const scroller = React.useRef<HTMLElement | null>(null);
  const rows = React.useRef<HTMLElement | null>(null);
  const focused = React.useRef<Element | null>(null);
  /** How far the list was scrolled when it was last on screen; null before it ever was. */
  const place = React.useRef<number | null>(null);
  const hidden = React.useRef(false);
  const [view, setView] = React.useState<IView>({ top: 0, height: 0, rowHeight: guess, offset: 0 });

  const measure = React.useCallback(() => {
    const element = scroller.current;
    if (element === null) {
      return;
    }
    // A hidden tab (the person in the chat, approving a cancel) has no height, and the browser
    // forgets how far its list was scrolled: keep the rows, and take the place back on return.
    if (element.clientHeight === 0 && place.current !== null) {
      hidden.current = true;
      return;
    }
    if (hidden.current) {
      hidden.current = false;
      if (element.scrollTop === 0 && place.current !== null && place.current > 0) {
        element.scrollTop = place.current;
      }
    }
    if (element.clientHeight > 0) {
      place.current = element.scrollTop;
    }
    // Where the rows start below the scrolling element's top (under a table's column names);
    // where nothing is laid out, at its top.
    const start = rows.current;
    const box = element.getBoundingClientRect();
    const offset =
      start && box.height > 0 ? start.getBoundingClientRect().top - box.top + element.scrollTop : 0;
    const row = start?.querySelector<HTMLElement>('[data-window-row]');
    const measured = row ? row.getBoundingClientRect().height : 0;
    const next: IView = {
      top: Math.max(0, element.scrollTop - offset),
      height: element.clientHeight,
      rowHeight: measured > 0 ? measured : guess,
      offset
    };
    setView(previous =>
      windowOf(previous, count, overscan).join() === windowOf(next, count, overscan).join() &&
      previous.rowHeight === next.rowHeight &&
      previous.offset === next.offset
        ? previous
        : next
    );
  }, [count, overscan, guess]);

  // Back to the top when the filter changes; the scroll event that follows measures.
  React.useLayoutEffect(() => {
    if (scroller.current) {
      scroller.current.scrollTop = 0;
    }
    setView(previous => (previous.top === 0 ? previous : { ...previous, top: 0 }));
  }, [from]);

  // After every change of the rows: a list that shrank under the view, a row height measured.
  React.useLayoutEffect(() => {
    measure();
    const gone = focused.current;
    if (gone && !gone.isConnected && scroller.current) {
      focused.current = null;
      if (document.activeElement === null || document.activeElement === document.body) {
        scroller.current.focus({ preventScroll: true });
      }
    }
  });

  // A panel resized, a window resized: the view's height changed. The list may come and go
  // (no jobs, then some), so the observer follows the scrolling element itself.
  const latest = React.useRef(measure);
  latest.current = measure;
  const observer = React.useRef<ResizeObserver | null>(null);
  const setScroller = React.useCallback((element: HTMLElement | null) => {
    observer.current?.disconnect();
    observer.current = null;
    scroller.current = element;
    if (element !== null && typeof ResizeObserver !== 'undefined') {
      observer.current = new ResizeObserver(() => latest.current());
      observer.current.observe(element);
    }
  }, []);

  const [first, end] = windowOf(view, count, overscan);
  return {
    first,
    end,
    before: first * view.rowHeight,
    after: (count - end) * view.rowHeight,
    leastHeight: view.offset + Math.min(count, least) * view.rowHeight,
    scroller: setScroller,
    rows: React.useCallback((element: HTMLElement | null) => {
      rows.current = element;
    }, []),
    onScroll: measure,
    onFocus: event => {
      focused.current = event.target === scroller.current ? null : event.target;
    }
  };
}

/** `[first, end)`: the rows of a `count`-row list in `view`, `overscan` more each side. */
function windowOf(view: IView, count: number, overscan: number): [number, number] {
  const height = view.height > 0 ? view.height : UNLAID_VIEW;
  // never past the list's end, though the list shrank before the scroll caught up
  const top = Math.min(view.top, Math.max(0, count * view.rowHeight - height));
  const first = Math.floor(top / view.rowHeight) - overscan;
  const end = Math.ceil((top + height) / view.rowHeight) + overscan;
  return [Math.min(Math.max(0, first), count), Math.min(Math.max(0, end), count)];
}

/** Props of {@link RoomRow}. */
export interface IRoomRowProps {
  /** Pixels. */
  height: number;
  /** How many columns the room spans, in a table. */
  columns?: number;
  /** `tr` in a table's body, `li` in a list. */
  as: 'tr' | 'li';
}

/** The room that stands for the rows left out of the page; hidden from screen readers. */
export function RoomRow({ height, columns = 1, as }: IRoomRowProps): JSX.Element | null {
  if (height <= 0) {
    return null;
  }
  const style = { height: `${height}px`, padding: 0, border: 0 };
  return as === 'tr' ? (
    <tr className="betty-RowWindow-room" aria-hidden="true" style={style}>
      <td colSpan={columns} style={style} />
    </tr>
  ) : (
    <li className="betty-RowWindow-room" aria-hidden="true" style={style} />
  );
}
