/**
 * Markdown's inline syntax (CommonMark's, with GFM's strikethrough and bare URLs) parsed
 * into data: text, code, emphasis, links and images. Raw HTML is not syntax here: `<b>`
 * stays the four characters a person typed. Nothing in this module makes DOM or HTML;
 * `safe.tsx` decides how each node is shown.
 */
import { mergeText, Piece, resolveEmphasis } from './emphasis';
import { decodeEntity } from './entities';
import type { Inline } from './nodes';

export type { Inline } from './nodes';

/** A link reference definition (`[label]: url "title"`). */
export interface ILinkTarget {
  url: string;
  title: string;
}

/** Link reference definitions by normalised label. */
export type LinkReferences = ReadonlyMap<string, ILinkTarget>;

/** The form a reference label is looked up by: case and runs of white space do not matter. */
export function normalizeLabel(label: string): string {
  return label.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** Backslash escapes and entities resolved, as in link destinations and titles. */
export function unescapeText(text: string): string {
  return text.replace(/\\([!-/:-@[-`{-~])|&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});/g,
    (whole, escaped: string | undefined, entity: string | undefined) =>
      escaped ?? decodeEntity(entity!) ?? whole
  );
}

/** Parse the inline content of a paragraph, heading or table cell. */
export function parseInlines(source: string, references: LinkReferences): Inline[] {
  return new InlineScanner(source, references, false).parse();
}


const SPECIAL = /[\\`&<![*_~\n]|https?:\/\/|www\./g;
const PUNCTUATION = /[\p{P}\p{S}]/u;
const WHITESPACE = /\s/u;
const ENTITY = /&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});/y;
const URI_AUTOLINK = /<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>/y;
const EMAIL_AUTOLINK =
  /<([a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*)>/y;
const BARE_URL = /(?:https?:\/\/|www\.)[^\s<]*/y;
const RUN = /`+|\*+|_+|~+/y;
const ANGLED_DESTINATION = /<((?:[^<>\n\\]|\\.)*)>/y;
const TITLE = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)/sy;
const SPACE = /[ \t]*\n?[ \t]*/y;
const MAX_NESTED_PARENS = 32;
/** Link text longer than this is not a link: keeps a page of unclosed brackets linear. */
const MAX_LABEL = 1000;

/** `pattern` (sticky) matched exactly at `at`, or null. */
function matchAt(pattern: RegExp, source: string, at: number): RegExpExecArray | null {
  pattern.lastIndex = at;
  return pattern.exec(source);
}

/** The length of the run of one character (backticks, stars, underscores, tildes) at `at`. */
function runAt(source: string, at: number): number {
  return matchAt(RUN, source, at)?.[0].length ?? 0;
}

class InlineScanner {
  private readonly pieces: Piece[] = [];
  private text = '';
  private at = 0;

  constructor(
    private readonly source: string,
    private readonly references: LinkReferences,
    private readonly insideLink: boolean
  ) {}

  parse(): Inline[] {
    while (this.at < this.source.length) {
      SPECIAL.lastIndex = this.at;
      const next = SPECIAL.exec(this.source);
      const stop = next === null ? this.source.length : next.index;
      this.text += this.source.slice(this.at, stop);
      this.at = stop;
      if (next !== null && !this.special()) {
        this.text += this.source[this.at];
        this.at += 1;
      }
    }
    this.flush();
    return mergeText(resolveEmphasis(this.pieces));
  }

  /** Consume the construct at `at`; false when the character there is literal. */
  private special(): boolean {
    const char = this.source[this.at];
    switch (char) {
      case '\\':
        return this.escape();
      case '`':
        return this.codeSpan();
      case '&':
        return this.entity();
      case '<':
        return this.autolink();
      case '!':
        return this.source[this.at + 1] === '[' && this.bracket(true);
      case '[':
        return this.bracket(false);
      case '*':
      case '_':
      case '~':
        return this.delimiter(char);
      case '\n':
        return this.lineEnd();
      default:
        return this.bareUrl();
    }
  }

  private escape(): boolean {
    const next = this.source[this.at + 1] ?? '';
    if (next === '\n') {
      this.push({ kind: 'break' });
      this.at += 2;
      this.skipIndent();
      return true;
    }
    if (/^[!-/:-@[-`{-~]$/.test(next)) {
      this.text += next;
      this.at += 2;
      return true;
    }
    return false;
  }

  private codeSpan(): boolean {
    const span = codeSpanAt(this.source, this.at);
    if (span === null) {
      const run = runAt(this.source, this.at);
      this.text += this.source.slice(this.at, this.at + run);
      this.at += run;
      return true;
    }
    this.push({ kind: 'code', text: span.text });
    this.at = span.end;
    return true;
  }

  private entity(): boolean {
    const found = matchAt(ENTITY, this.source, this.at);
    const decoded = found ? decodeEntity(found[1]) : null;
    if (found === null || decoded === null) {
      return false;
    }
    this.text += decoded;
    this.at += found[0].length;
    return true;
  }

  private autolink(): boolean {
    const uri = matchAt(URI_AUTOLINK, this.source, this.at);
    const email = uri ? null : matchAt(EMAIL_AUTOLINK, this.source, this.at);
    const found = uri ?? email;
    if (found === null || this.insideLink) {
      return false;
    }
    const url = uri ? found[1] : `mailto:${found[1]}`;
    this.push({ kind: 'link', url, title: '', children: [{ kind: 'text', text: found[1] }] });
    this.at += found[0].length;
    return true;
  }

  private bareUrl(): boolean {
    const before = this.source[this.at - 1];
    const found = matchAt(BARE_URL, this.source, this.at);
    if (this.insideLink || found === null || (before !== undefined && !/[\s(*_~]/.test(before))) {
      return false;
    }
    const text = trimUrl(found[0]);
    if (text.length <= 'www.'.length || !/[.:]\S/.test(text)) {
      return false;
    }
    const url = text.startsWith('www.') ? `http://${text}` : text;
    this.push({ kind: 'link', url, title: '', children: [{ kind: 'text', text }] });
    this.at += text.length;
    return true;
  }

  private bracket(image: boolean): boolean {
    const open = this.at + (image ? 1 : 0);
    const close = labelEnd(this.source, open);
    if (close < 0 || (!image && this.insideLink)) {
      return false;
    }
    const label = this.source.slice(open + 1, close);
    const target = this.linkTarget(label, close + 1);
    if (target === null) {
      return false;
    }
    if (image) {
      const alt = plainText(new InlineScanner(label, this.references, true).parse());
      this.push({ kind: 'image', url: target.url, title: target.title, alt });
    } else {
      const children = new InlineScanner(label, this.references, true).parse();
      this.push({ kind: 'link', url: target.url, title: target.title, children });
    }
    this.at = target.end;
    return true;
  }

  /** What follows `]` at `after`: `(url "title")`, `[ref]`, `[]` or nothing (a shortcut). */
  private linkTarget(label: string, after: number): (ILinkTarget & { end: number }) | null {
    if (this.source[after] === '(') {
      const inline = inlineTarget(this.source, after + 1);
      if (inline !== null) {
        return inline;
      }
    }
    if (this.source[after] === '[') {
      const close = labelEnd(this.source, after);
      if (close > 0) {
        const name = this.source.slice(after + 1, close);
        const found = this.references.get(normalizeLabel(name === '' ? label : name));
        if (found) {
          return { ...found, end: close + 1 };
        }
        if (name !== '') {
          return null;
        }
      }
    }
    const shortcut = this.references.get(normalizeLabel(label));
    return shortcut ? { ...shortcut, end: after } : null;
  }

  private delimiter(char: '*' | '_' | '~'): boolean {
    const length = runAt(this.source, this.at);
    const before = this.source[this.at - 1] ?? '\n';
    const after = this.source[this.at + length] ?? '\n';
    if (char === '~' && length > 2) {
      this.text += '~'.repeat(length);
      this.at += length;
      return true;
    }
    const left = !isSpace(after) && (!isPunctuation(after) || isSpace(before) || isPunctuation(before));
    const right = !isSpace(before) && (!isPunctuation(before) || isSpace(after) || isPunctuation(after));
    const intraword = char === '_';
    this.push({
      kind: 'delimiter',
      char,
      count: length,
      length,
      canOpen: left && (!intraword || !right || isPunctuation(before)),
      canClose: right && (!intraword || !left || isPunctuation(after))
    });
    this.at += length;
    return true;
  }

  private lineEnd(): boolean {
    const hard = / {2,}$/.test(this.text);
    this.text = this.text.replace(/ +$/, '');
    this.push(hard ? { kind: 'break' } : { kind: 'text', text: '\n' });
    this.at += 1;
    this.skipIndent();
    return true;
  }

  private skipIndent(): void {
    while (this.source[this.at] === ' ' || this.source[this.at] === '\t') {
      this.at += 1;
    }
  }

  private push(piece: Piece): void {
    this.flush();
    this.pieces.push(piece);
  }

  private flush(): void {
    if (this.text !== '') {
      this.pieces.push({ kind: 'text', text: this.text });
      this.text = '';
    }
  }
}

/** The code span opening at `start` (its content, the index after it), or null when unclosed. */
export function codeSpanAt(source: string, start: number): { text: string; end: number } | null {
  const run = runAt(source, start);
  const closing = new RegExp(`(?<!\`)\`{${run}}(?!\`)`, 'g');
  closing.lastIndex = start + run;
  const found = closing.exec(source);
  if (found === null) {
    return null;
  }
  let text = source.slice(start + run, found.index).replace(/\n/g, ' ');
  if (/^ .*[^ ].* $/s.test(text)) {
    text = text.slice(1, -1);
  }
  return { text, end: found.index + run };
}

/** The index of the `]` that closes the `[` at `open`, skipping escapes and code spans; -1 if none. */
function labelEnd(source: string, open: number): number {
  const label = source.slice(open, open + MAX_LABEL);
  let depth = 0;
  for (let i = 0; i < label.length; i++) {
    const char = label[i];
    if (char === '\\') {
      i += 1;
    } else if (char === '`') {
      const span = codeSpanAt(label, i);
      i = span === null ? i + runAt(label, i) - 1 : span.end - 1;
    } else if (char === '[') {
      depth += 1;
    } else if (char === ']') {
      depth -= 1;
      if (depth === 0) {
        return open + i;
      }
    }
  }
  return -1;
}

/** `url "title")` from `start` (just after the `(`), or null when it is not a link destination. */
function inlineTarget(source: string, start: number): (ILinkTarget & { end: number }) | null {
  let at = skipSpace(source, start);
  let raw: string;
  if (source[at] === '<') {
    const angled = matchAt(ANGLED_DESTINATION, source, at);
    if (angled === null) {
      return null;
    }
    raw = angled[1];
    at += angled[0].length;
  } else {
    const end = bareDestinationEnd(source, at);
    if (end < 0) {
      return null;
    }
    raw = source.slice(at, end);
    at = end;
  }
  let title = '';
  const afterSpace = skipSpace(source, at);
  const quoted = matchAt(TITLE, source, afterSpace);
  if (quoted !== null && afterSpace > at) {
    title = unescapeText(quoted[0].slice(1, -1));
    at = afterSpace + quoted[0].length;
  }
  at = skipSpace(source, at);
  if (source[at] !== ')') {
    return null;
  }
  return { url: unescapeText(raw), title, end: at + 1 };
}

/** The end of a destination without angle brackets: no spaces or controls, parentheses balanced. */
function bareDestinationEnd(source: string, start: number): number {
  let depth = 0;
  let at = start;
  for (; at < source.length; at++) {
    const char = source[at];
    if (char === '\\' && at + 1 < source.length) {
      at += 1;
    } else if (char === '(') {
      depth += 1;
      if (depth > MAX_NESTED_PARENS) {
        return -1;
      }
    } else if (char === ')') {
      if (depth === 0) {
        break;
      }
      depth -= 1;
    } else if (/[\s\x00-\x1f\x7f]/.test(char)) {
      break;
    }
  }
  return depth === 0 ? at : -1;
}

function skipSpace(source: string, at: number): number {
  return at + (matchAt(SPACE, source, at)?.[0].length ?? 0);
}

/** A bare URL without the punctuation that ends the sentence around it. */
function trimUrl(url: string): string {
  let text = url;
  for (;;) {
    const trimmed = text.replace(/[?!.,:*_~'"]+$/, '').replace(/&[A-Za-z0-9]+;$/, '');
    const opens = trimmed.split('(').length;
    const closes = trimmed.split(')').length;
    const next = trimmed.endsWith(')') && closes > opens ? trimmed.slice(0, -1) : trimmed;
    if (next === text) {
      return text;
    }
    text = next;
  }
}

/** The text of inline content without its markup (an image's alt text). */
export function plainText(inlines: readonly Inline[]): string {
  return inlines
    .map(inline => {
      switch (inline.kind) {
        case 'text':
        case 'code':
          return inline.text;
        case 'break':
          return '\n';
        case 'image':
          return inline.alt;
        default:
          return plainText(inline.children);
      }
    })
    .join('');
}

function isSpace(char: string): boolean {
  return WHITESPACE.test(char);
}

function isPunctuation(char: string): boolean {
  return PUNCTUATION.test(char);
}
