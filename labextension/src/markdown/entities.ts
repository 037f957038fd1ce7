/**
 * HTML character references in markdown text (`&amp;`, `&#60;`, `&#x3C;`) decoded to the
 * characters they name. The result is text for React to show, never markup: `&lt;script&gt;`
 * becomes the eight characters `<script>` on screen.
 */

/** The named references people and models write; others stay as typed. */
const NAMED: Readonly<Record<string, string>> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: '\u00a0',
  copy: '©',
  reg: '®',
  trade: '™',
  hellip: '…',
  mdash: '—',
  ndash: '–',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
  laquo: '«',
  raquo: '»',
  bull: '•',
  middot: '·',
  times: '×',
  divide: '÷',
  deg: '°',
  plusmn: '±',
  micro: 'µ',
  le: '≤',
  ge: '≥',
  ne: '≠',
  asymp: '≈',
  infin: '∞',
  larr: '←',
  rarr: '→',
  uarr: '↑',
  darr: '↓',
  harr: '↔',
  sect: '§',
  para: '¶',
  euro: '€',
  pound: '£',
  yen: '¥',
  cent: '¢'
};

const REPLACEMENT = '\ufffd';

/** The character `&name;` stands for (`name` without `&` and `;`), or null for an unknown name. */
export function decodeEntity(name: string): string | null {
  if (!name.startsWith('#')) {
    return Object.prototype.hasOwnProperty.call(NAMED, name) ? NAMED[name] : null;
  }
  const hex = name[1] === 'x' || name[1] === 'X';
  const code = parseInt(name.slice(hex ? 2 : 1), hex ? 16 : 10);
  if (!Number.isFinite(code) || code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
    return REPLACEMENT;
  }
  return String.fromCodePoint(code);
}
