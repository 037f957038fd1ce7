/**
 * Emphasis in markdown: CommonMark's delimiter runs (`*`, `_`) and GFM's strikethrough (`~`)
 * matched into emphasis, strong and struck-through text; what stays unmatched is text.
 */
import type { Inline } from './nodes';

/** A run of `*`, `_` or `~` that may open or close emphasis. */
export interface IDelimiter {
  kind: 'delimiter';
  char: '*' | '_' | '~';
  count: number;
  length: number;
  canOpen: boolean;
  canClose: boolean;
}

/** Inline content with the delimiter runs not matched yet. */
export type Piece = Inline | IDelimiter;

/** A paragraph with more emphasis marks than this shows them as typed: matching is quadratic. */
const MAX_DELIMITERS = 1000;

/**
 * CommonMark's "process emphasis": each closing delimiter run, left to right, is matched
 * with the nearest opening run of the same character before it.
 */
export function resolveEmphasis(input: Piece[]): Inline[] {
  const pieces = [...input];
  if (pieces.filter(piece => piece.kind === 'delimiter').length > MAX_DELIMITERS) {
    return pieces.map(literal);
  }
  const bottom = new Map<string, number>();
  let closerAt = 0;
  while (closerAt < pieces.length) {
    const closer = pieces[closerAt];
    if (closer.kind !== 'delimiter' || !closer.canClose) {
      closerAt += 1;
      continue;
    }
    const key = `${closer.char}${closer.canOpen}${closer.length % 3}`;
    const openerAt = findOpener(pieces, closerAt, bottom.get(key) ?? -1);
    if (openerAt < 0) {
      bottom.set(key, closerAt - 1);
      closerAt += 1;
      continue;
    }
    closerAt = joinEmphasis(pieces, openerAt, closerAt);
    for (const [other, floor] of bottom) {
      // The pieces after the opener moved: a floor among them would hide openers after the match.
      if (floor >= openerAt) {
        bottom.set(other, openerAt - 1);
      }
    }
  }
  return pieces.map(literal);
}

/** A delimiter left unmatched is the characters it was typed as. */
function literal(piece: Piece): Inline {
  return piece.kind === 'delimiter' ? { kind: 'text', text: piece.char.repeat(piece.count) } : piece;
}

function findOpener(pieces: Piece[], closerAt: number, floor: number): number {
  const closer = pieces[closerAt] as IDelimiter;
  for (let at = closerAt - 1; at > floor; at--) {
    const opener = pieces[at];
    if (opener.kind !== 'delimiter' || opener.char !== closer.char || !opener.canOpen) {
      continue;
    }
    if (closer.char === '~') {
      if (opener.count === closer.count) {
        return at;
      }
      continue;
    }
    const oddMatch =
      (opener.canClose || closer.canOpen) &&
      (opener.length + closer.length) % 3 === 0 &&
      !(opener.length % 3 === 0 && closer.length % 3 === 0);
    if (!oddMatch) {
      return at;
    }
  }
  return -1;
}

/** Wrap what lies between a matched opener and closer; the index to look at next. */
function joinEmphasis(pieces: Piece[], openerAt: number, closerAt: number): number {
  const opener = pieces[openerAt] as IDelimiter;
  const closer = pieces[closerAt] as IDelimiter;
  const used = closer.char === '~' ? closer.count : Math.min(2, opener.count, closer.count);
  const kind = closer.char === '~' ? 'strike' : used === 2 ? 'strong' : 'emphasis';
  const inner = pieces.slice(openerAt + 1, closerAt).map(literal);
  opener.count -= used;
  closer.count -= used;
  const replacement: Piece[] = [{ kind, children: mergeText(inner) }];
  if (opener.count > 0) {
    replacement.unshift(opener);
  }
  if (closer.count > 0) {
    replacement.push(closer);
  }
  pieces.splice(openerAt, closerAt - openerAt + 1, ...replacement);
  return openerAt + replacement.length - (closer.count > 0 ? 1 : 0);
}

/** Adjacent text joined, empty text dropped. */
export function mergeText(inlines: Inline[]): Inline[] {
  const merged: Inline[] = [];
  for (const inline of inlines) {
    const last = merged[merged.length - 1];
    if (inline.kind === 'text' && last?.kind === 'text') {
      merged[merged.length - 1] = { kind: 'text', text: last.text + inline.text };
    } else if (inline.kind !== 'text' || inline.text !== '') {
      merged.push(inline);
    }
  }
  return merged;
}
