/**
 * A small highlighter for batch scripts and diffs: enough colour to read an approval's
 * preview at a glance, without loading an editor into every card.
 */

/** A run of text and the class of its colour (none for plain text). */
export interface IToken {
  text: string;
  kind?: 'directive' | 'comment' | 'string' | 'variable' | 'keyword' | 'shebang';
}

const SHELL_KEYWORDS =
  'if|then|else|elif|fi|for|while|until|do|done|case|esac|in|function|return|export|local|set|source|exit';

const SHELL_TOKENS = new RegExp(
  [
    String.raw`((?:^|(?<=\s))#.*$)`, // a comment, to the end of the line
    String.raw`('[^']*'?|"(?:[^"\\]|\\.)*"?)`, // a quoted string
    String.raw`(\$\{[^}]*\}?|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@#?$!*-])`, // a variable
    String.raw`\b(${SHELL_KEYWORDS})\b` // a keyword
  ].join('|'),
  'g'
);

/** One line of a shell script as tokens: `#SBATCH` directives, comments, strings, variables, keywords. */
export function highlightShellLine(line: string): IToken[] {
  const directive = /^(\s*)(#SBATCH)(.*)$/.exec(line);
  if (directive) {
    const tokens: IToken[] = [{ text: directive[2], kind: 'directive' }];
    if (directive[1]) {
      tokens.unshift({ text: directive[1] });
    }
    return directive[3] ? [...tokens, { text: directive[3], kind: 'string' }] : tokens;
  }
  if (line.startsWith('#!')) {
    return [{ text: line, kind: 'shebang' }];
  }
  const tokens: IToken[] = [];
  let last = 0;
  for (const match of line.matchAll(SHELL_TOKENS)) {
    const start = match.index ?? 0;
    if (start > last) {
      tokens.push({ text: line.slice(last, start) });
    }
    const kind = match[1] ? 'comment' : match[2] ? 'string' : match[3] ? 'variable' : 'keyword';
    tokens.push({ text: match[0], kind });
    last = start + match[0].length;
  }
  if (last < line.length) {
    tokens.push({ text: line.slice(last) });
  }
  return tokens;
}

/** How a line of a unified diff reads. */
export type DiffLineKind = 'added' | 'removed' | 'hunk' | 'file' | 'context';

/** The kind of one line of a unified diff. */
export function diffLineKind(line: string): DiffLineKind {
  if (line.startsWith('+++') || line.startsWith('---')) {
    return 'file';
  }
  if (line.startsWith('@@')) {
    return 'hunk';
  }
  if (line.startsWith('+')) {
    return 'added';
  }
  if (line.startsWith('-')) {
    return 'removed';
  }
  return 'context';
}
