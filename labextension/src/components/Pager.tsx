/**
 * A long list shown a page at a time: only that page's rows are in the page (a person with
 * 20,000 jobs gets 100 rows, not 20,000), with Previous and Next and where the page lies.
 */
import * as React from 'react';

import { formatCount } from '../format';

/** One page of a list: its rows and where they lie in it. */
export interface IPage<T> {
  /** The rows on this page. */
  rows: T[];
  /** The page's index (from 0), kept within the list as it shrinks. */
  index: number;
  /** How many rows the whole list holds. */
  total: number;
  size: number;
  /** Show page `index` (kept within the list). */
  show: (index: number) => void;
}

/**
 * The page of `rows` the person is on, `size` rows long; back to the first page when `from`
 * changes (a filter chosen), kept on the last page when the list shrinks under it.
 */
export function usePage<T>(rows: T[], size: number, from: unknown = null): IPage<T> {
  const [wanted, setWanted] = React.useState(0);
  React.useEffect(() => setWanted(0), [from]);
  const last = Math.max(0, Math.ceil(rows.length / size) - 1);
  const index = Math.min(Math.max(0, wanted), last);
  return {
    rows: rows.slice(index * size, (index + 1) * size),
    index,
    total: rows.length,
    size,
    show: next => setWanted(Math.min(Math.max(0, next), last))
  };
}

/** Props of {@link Pager}. */
export interface IPagerProps {
  page: IPage<unknown>;
  /** The `data-testid` of the pager (`betty-jobs-pager`, `betty-finished-pager`). */
  testId: string;
}

/** `rows 101–200 of 20,000` with Previous and Next; nothing when the list fits on one page. */
export function Pager({ page, testId }: IPagerProps): JSX.Element | null {
  if (page.total <= page.size) {
    return null;
  }
  const first = page.index * page.size + 1;
  const last = first + page.rows.length - 1;
  const lastIndex = Math.ceil(page.total / page.size) - 1;
  return (
    <div className="betty-Pager" data-testid={testId}>
      <button
        className="betty-Button"
        data-testid="betty-pager-previous"
        disabled={page.index === 0}
        onClick={() => page.show(page.index - 1)}
      >
        Previous
      </button>
      <span className="betty-Pager-range" data-testid="betty-pager-range">
        rows {formatCount(first)}–{formatCount(last)} of {formatCount(page.total)}
      </span>
      <button
        className="betty-Button"
        data-testid="betty-pager-next"
        disabled={page.index >= lastIndex}
        onClick={() => page.show(page.index + 1)}
      >
        Next
      </button>
    </div>
  );
}
