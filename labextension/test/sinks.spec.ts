/// <reference types="node" />
/**
 * No module of the panel turns text into HTML by itself: HTML sinks are used nowhere, and
 * links and other URL attributes are made only by `src/safe.tsx`, which checks them.
 */
import * as fs from 'fs';
import * as path from 'path';

const SOURCES = path.join(__dirname, '..', 'src');
const SAFE_MODULE = path.join(SOURCES, 'safe.tsx');

/** Ways to put a string into the page as HTML, or to render markdown as HTML. */
const HTML_SINKS =
  /\b(innerHTML|outerHTML|insertAdjacentHTML|dangerouslySetInnerHTML|createContextualFragment|srcdoc|DOMParser|renderHTML|renderMarkdown)\b|document\.write|createRenderer\(/;

/** Ways to make an element follow or load a URL. */
const URL_SINKS =
  /\b(href|src|srcSet|formAction|action)=|\.(href|src|action)\s*=[^=]|<(a|img|iframe|embed|object|link|script)[\s>]|setAttribute\(|window\.open\(/;

function sourceFiles(directory: string): string[] {
  return fs.readdirSync(directory, { withFileTypes: true }).flatMap(entry => {
    const full = path.join(directory, entry.name);
    return entry.isDirectory() ? sourceFiles(full) : /\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

/** `file:line: text` of each code line (comments left out) that `pattern` matches. */
function uses(files: string[], pattern: RegExp): string[] {
  return files.flatMap(file =>
    fs
      .readFileSync(file, 'utf-8')
      .split('\n')
      .map((line, i) => ({ line, at: `${path.relative(SOURCES, file)}:${i + 1}` }))
      .filter(({ line }) => !/^\s*(\/\/|\/\*|\*)/.test(line) && pattern.test(line))
      .map(({ line, at }) => `${at}: ${line.trim()}`)
  );
}

describe('HTML and URLs in the panel', () => {
  const files = sourceFiles(SOURCES);

  it('finds the sources', () => {
    expect(files).toContain(SAFE_MODULE);
    expect(files.length).toBeGreaterThan(10);
  });

  it('sets no HTML from a string anywhere', () => {
    expect(uses(files, HTML_SINKS)).toEqual([]);
  });

  it('makes links and URL attributes only in safe.tsx', () => {
    expect(uses(files.filter(file => file !== SAFE_MODULE), URL_SINKS)).toEqual([]);
    expect(uses([SAFE_MODULE], URL_SINKS).length).toBeGreaterThan(0);
  });

  it.each([
    'node.innerHTML = text;',
    '<div dangerouslySetInnerHTML={{ __html: text }} />',
    "element.insertAdjacentHTML('beforeend', text);",
    "const renderer = rendermime.createRenderer('text/markdown');",
    'new DOMParser().parseFromString(text, "text/html")'
  ])('would catch %j', line => {
    expect(HTML_SINKS.test(line)).toBe(true);
  });

  it.each([
    '<a href={url}>{name}</a>',
    '<img src={url} />',
    "link.setAttribute('href', url);",
    'image.src = url;',
    'window.open(url);'
  ])('would catch %j outside safe.tsx', line => {
    expect(URL_SINKS.test(line)).toBe(true);
  });
});
