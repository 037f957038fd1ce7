/**
 * Markdown's block structure (CommonMark's paragraphs, headings, fences, quotes and lists,
 * with GFM's tables) parsed into data. Lines that look like HTML are paragraph text, so
 * raw HTML is shown as typed. Nothing here makes DOM or HTML: `safe.tsx` shows the result.
 */
import { ILinkTarget, Inline, normalizeLabel, parseInlines, unescapeText } from './inlines';

/** A table column's alignment. */
export type Align = 'left' | 'center' | 'right' | null;

/** A block whose inline content is `T` (source text while parsing, inlines once resolved). */
export type BlockOf<T> =
  | { kind: 'paragraph'; content: T }
  | { kind: 'heading'; level: number; content: T }
  | { kind: 'code'; language: string; text: string }
  | { kind: 'quote'; blocks: BlockOf<T>[] }
  | { kind: 'list'; ordered: boolean; start: number; tight: boolean; items: BlockOf<T>[][] }
  | { kind: 'table'; align: Align[]; head: T[]; rows: T[][] }
  | { kind: 'rule' };

/** A parsed block of markdown. */
export type Block = BlockOf<Inline[]>;

type RawBlock = BlockOf<string>;
/** A block (null for one that shows nothing) and the index of the line after it. */
type Step = [RawBlock | null, number];
type Found = Step | null;

/** Quotes and lists nested deeper than this are read as text, so no input can exhaust the stack. */
const MAX_DEPTH = 16;

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$/;
const RULE = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST_ITEM = /^( {0,3})([-+*]|(\d{1,9})[.)])(?:([ \t]+)(.*))?$/;
const DELIMITER_CELL = /^:?-+:?$/;
const REFERENCE =
  /^ {0,3}\[((?:[^\\[\]]|\\.){1,999})\]:[ \t]*(?:<([^<>\n]*)>|(\S+))(?:[ \t]+("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)))?[ \t]*$/;

/** Parse markdown `text` into blocks. */
export function parseMarkdown(text: string): Block[] {
  const lines = text.replace(/\r\n?/g, '\n').replace(/\0/g, '\ufffd').split('\n').map(expandIndent);
  const references = new Map<string, ILinkTarget>();
  const raw = new BlockParser(references, 0).parse(lines);
  return raw.map(block => resolve(block, content => parseInlines(content, references)));
}

function resolve(block: RawBlock, inline: (text: string) => Inline[]): Block {
  switch (block.kind) {
    case 'paragraph':
    case 'heading':
      return { ...block, content: inline(block.content) };
    case 'quote':
      return { kind: 'quote', blocks: block.blocks.map(inner => resolve(inner, inline)) };
    case 'list':
      return { ...block, items: block.items.map(item => item.map(inner => resolve(inner, inline))) };
    case 'table':
      return { ...block, head: block.head.map(inline), rows: block.rows.map(row => row.map(inline)) };
    default:
      return block;
  }
}

class BlockParser {
  constructor(
    private readonly references: Map<string, ILinkTarget>,
    private readonly depth: number
  ) {}

  parse(lines: string[]): RawBlock[] {
    const blocks: RawBlock[] = [];
    let at = 0;
    while (at < lines.length) {
      if (isBlank(lines[at])) {
        at += 1;
        continue;
      }
      const [block, next] =
        fence(lines, at) ??
        indentedCode(lines, at) ??
        heading(lines, at) ??
        rule(lines, at) ??
        this.quote(lines, at) ??
        this.list(lines, at) ??
        table(lines, at) ??
        this.paragraph(lines, at);
      if (block !== null) {
        blocks.push(block);
      }
      at = next;
    }
    return blocks;
  }

  private nested(lines: string[]): RawBlock[] {
    return new BlockParser(this.references, this.depth + 1).parse(lines);
  }

  private quote(lines: string[], at: number): Found {
    if (this.depth >= MAX_DEPTH || !QUOTE.test(lines[at])) {
      return null;
    }
    const inner: string[] = [];
    let next = at;
    for (; next < lines.length; next++) {
      const line = lines[next];
      if (QUOTE.test(line)) {
        inner.push(line.replace(QUOTE, ''));
      } else if (!isBlank(line) && !isBlank(inner[inner.length - 1]) && !interrupts(line)) {
        inner.push(line); // a lazy continuation of the quoted paragraph
      } else {
        break;
      }
    }
    return [{ kind: 'quote', blocks: this.nested(inner) }, next];
  }

  private list(lines: string[], at: number): Found {
    const first = listMarker(lines[at]);
    if (this.depth >= MAX_DEPTH || first === null) {
      return null;
    }
    const items: RawBlock[][] = [];
    let tight = true;
    let next = at;
    while (next < lines.length) {
      const marker = listMarker(lines[next]);
      if (marker === null || marker.type !== first.type || RULE.test(lines[next])) {
        break;
      }
      const [itemLines, end] = listItem(lines, next, marker);
      const blocks = this.nested(itemLines);
      const blankAfter = end - next > itemLines.length;
      const continues = end < lines.length && listContinues(lines[end], first);
      if ((blankAfter && continues) || (itemLines.some(isBlank) && blocks.length > 1)) {
        tight = false;
      }
      items.push(blocks);
      next = end;
      if (blankAfter && !continues) {
        break;
      }
    }
    const start = first.number ?? 1;
    return [{ kind: 'list', ordered: first.number !== null, start, tight, items }, next];
  }

  private paragraph(lines: string[], at: number): Step {
    const text: string[] = [];
    let next = at;
    for (; next < lines.length; next++) {
      const line = lines[next];
      if (isBlank(line)) {
        break;
      }
      const underline = text.length > 0 ? SETEXT.exec(line) : null;
      if (underline !== null) {
        const content = this.withoutReferences(text);
        if (content !== '') {
          return [{ kind: 'heading', level: underline[1][0] === '=' ? 1 : 2, content }, next + 1];
        }
      }
      if (next > at && (interrupts(line) || tableAt(lines, next))) {
        break;
      }
      text.push(line.trimStart());
    }
    const content = this.withoutReferences(text);
    return [content === '' ? null : { kind: 'paragraph', content }, next];
  }

  /** The paragraph's text after the link reference definitions that open it (recorded). */
  private withoutReferences(text: string[]): string {
    let first = 0;
    for (; first < text.length; first++) {
      const found = REFERENCE.exec(text[first]);
      if (found === null || found[1].trim() === '') {
        break;
      }
      const label = normalizeLabel(found[1]);
      if (!this.references.has(label)) {
        const title = found[4] ? unescapeText(found[4].slice(1, -1)) : '';
        this.references.set(label, { url: unescapeText(found[2] ?? found[3]), title });
      }
    }
    return text.slice(first).join('\n').trimEnd();
  }
}

function fence(lines: string[], at: number): Found {
  const open = FENCE.exec(lines[at]);
  if (open === null || (open[2][0] === '`' && open[3].includes('`'))) {
    return null;
  }
  const [, indent, marker, info] = open;
  const closing = new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}[ \\t]*$`);
  const text: string[] = [];
  let next = at + 1;
  for (; next < lines.length && !closing.test(lines[next]); next++) {
    text.push(lines[next].replace(new RegExp(`^ {0,${indent.length}}`), ''));
  }
  const language = unescapeText(info.trim().split(/\s+/)[0] ?? '');
  return [{ kind: 'code', language, text: text.join('\n') }, next + 1];
}

function indentedCode(lines: string[], at: number): Found {
  if (indentOf(lines[at]) < 4) {
    return null;
  }
  const text: string[] = [];
  let next = at;
  for (; next < lines.length && (isBlank(lines[next]) || indentOf(lines[next]) >= 4); next++) {
    text.push(isBlank(lines[next]) ? '' : lines[next].slice(4));
  }
  while (text.length > 0 && text[text.length - 1] === '') {
    text.pop();
    next -= 1;
  }
  return [{ kind: 'code', language: '', text: text.join('\n') }, next];
}

function heading(lines: string[], at: number): Found {
  const found = HEADING.exec(lines[at]);
  if (found === null) {
    return null;
  }
  const content = found[2].replace(/(?:^|[ \t]+)#+[ \t]*$/, '').trim();
  return [{ kind: 'heading', level: found[1].length, content }, at + 1];
}

function rule(lines: string[], at: number): Found {
  return RULE.test(lines[at]) ? [{ kind: 'rule' }, at + 1] : null;
}

function table(lines: string[], at: number): Found {
  const shape = tableAt(lines, at);
  if (shape === null) {
    return null;
  }
  const rows: string[][] = [];
  let next = at + 2;
  for (; next < lines.length && !isBlank(lines[next]) && !interrupts(lines[next]); next++) {
    const cells = tableCells(lines[next]);
    rows.push(shape.head.map((_, i) => cells[i] ?? ''));
  }
  return [{ kind: 'table', align: shape.align, head: shape.head, rows }, next];
}

/** The header and alignments of a table starting at `at` (a header row, then a delimiter row). */
function tableAt(lines: string[], at: number): { head: string[]; align: Align[] } | null {
  const header = lines[at];
  const delimiter = lines[at + 1];
  if (delimiter === undefined || !(hasPipe(header) || hasPipe(delimiter)) || indentOf(header) >= 4) {
    return null;
  }
  const head = tableCells(header);
  const marks = tableCells(delimiter);
  if (marks.length !== head.length || !marks.every(mark => DELIMITER_CELL.test(mark))) {
    return null;
  }
  const align = marks.map(mark =>
    mark.startsWith(':') ? (mark.endsWith(':') ? 'center' : 'left') : mark.endsWith(':') ? 'right' : null
  );
  return { head, align };
}

/** A table row's cells, split on the pipes a backslash does not escape. */
function tableCells(line: string): string[] {
  const row = line.trim().replace(/^\|/, '').replace(/(?<!\\)\|$/, '');
  return row.split(/(?<!\\)\|/).map(cell => cell.trim().replace(/\\\|/g, '|'));
}

function hasPipe(line: string): boolean {
  return /(?<!\\)\|/.test(line);
}

interface IListMarker {
  /** The bullet, or the delimiter after an ordered item's number. */
  type: string;
  number: number | null;
  /** The column the item's content starts at. */
  width: number;
  content: string;
}

function listMarker(line: string): IListMarker | null {
  const found = LIST_ITEM.exec(line);
  if (found === null) {
    return null;
  }
  const [, indent, marker, digits, spaces = '', rest = ''] = found;
  const type = digits === undefined ? marker : marker.slice(-1);
  const number = digits === undefined ? null : parseInt(digits, 10);
  const gap = rest === '' || spaces.length > 4 ? 1 : spaces.length;
  const content = rest === '' ? '' : spaces.slice(gap) + rest;
  return { type, number, width: indent.length + marker.length + gap, content };
}

function listContinues(line: string, first: IListMarker): boolean {
  const marker = listMarker(line);
  return marker !== null && marker.type === first.type && !RULE.test(line);
}

/** The lines of the list item at `at` (its content indentation removed) and the index after it. */
function listItem(lines: string[], at: number, marker: IListMarker): [string[], number] {
  const item = [marker.content];
  let next = at + 1;
  for (; next < lines.length; next++) {
    const line = lines[next];
    const previous = item[item.length - 1];
    if (isBlank(line)) {
      item.push('');
    } else if (indentOf(line) >= marker.width) {
      item.push(line.slice(marker.width));
    } else if (isLazy(line, previous)) {
      item.push(line.trimStart());
    } else {
      break;
    }
  }
  let kept = item.length;
  while (kept > 1 && isBlank(item[kept - 1])) {
    kept -= 1;
  }
  return [item.slice(0, kept), next];
}

/** Whether `line`, indented less than its item, still continues the item's paragraph. */
function isLazy(line: string, previous: string): boolean {
  return !isBlank(previous) && !FENCE.test(previous) && !interrupts(line) && listMarker(line) === null;
}

/** Whether `line` starts a block that ends a paragraph before it. */
function interrupts(line: string): boolean {
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) {
    return true;
  }
  const marker = listMarker(line);
  return marker !== null && marker.content.trim() !== '' && (marker.number === null || marker.number === 1);
}

function isBlank(line: string | undefined): boolean {
  return line === undefined || /^[ \t]*$/.test(line);
}

function indentOf(line: string): number {
  return /^ */.exec(line)![0].length;
}

/** Leading tabs as spaces to the next multiple of four, so indentation can be counted. */
function expandIndent(line: string): string {
  return line.replace(/^[ \t]+/, space => {
    let width = 0;
    for (const char of space) {
      width = char === '\t' ? width + 4 - (width % 4) : width + 1;
    }
    return ' '.repeat(width);
  });
}
