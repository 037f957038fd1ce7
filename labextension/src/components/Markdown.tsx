/**
 * Markdown in the chat, rendered by JupyterLab's own (sanitizing) markdown renderer when
 * the panel provides one, as plain text otherwise.
 */
import * as React from 'react';

/** A markdown renderer bound to one element; JupyterLab's rendermime provides it. */
export interface IMarkdownRenderer {
  /** The element the markdown is rendered into. */
  readonly node: HTMLElement;
  /** Render `text` into `node`, replacing what was there. */
  render(text: string): Promise<void>;
  /** Free the renderer. */
  dispose(): void;
}

/** Makes one renderer per message; null renders plain text. */
export type MarkdownRendererFactory = (() => IMarkdownRenderer) | null;

/** How messages are rendered, provided by the panel. */
export const MarkdownContext = React.createContext<MarkdownRendererFactory>(null);

/** While a reply streams, it is rendered at most this often. */
const STREAMING_RENDER_MS = 150;

/** Props of {@link Markdown}. */
export interface IMarkdownProps {
  text: string;
  /** True while the text still grows: renders are spaced out. */
  streaming?: boolean;
}

/** `text` rendered as markdown. */
export function Markdown({ text, streaming = false }: IMarkdownProps): JSX.Element {
  const factory = React.useContext(MarkdownContext);
  const host = React.useRef<HTMLDivElement>(null);
  const renderer = React.useRef<IMarkdownRenderer | null>(null);

  React.useEffect(() => {
    if (factory === null || host.current === null) {
      return;
    }
    const made = factory();
    renderer.current = made;
    host.current.appendChild(made.node);
    return () => {
      renderer.current = null;
      made.dispose();
    };
  }, [factory]);

  // While streaming, render at most every STREAMING_RENDER_MS, always the latest text.
  const latest = React.useRef(text);
  latest.current = text;
  const timer = React.useRef<ReturnType<typeof setTimeout> | null>(null);
  React.useEffect(() => {
    const current = renderer.current;
    if (current === null) {
      return;
    }
    if (!streaming) {
      if (timer.current !== null) {
        clearTimeout(timer.current);
        timer.current = null;
      }
      void current.render(text);
    } else if (timer.current === null) {
      timer.current = setTimeout(() => {
        timer.current = null;
        void renderer.current?.render(latest.current);
      }, STREAMING_RENDER_MS);
    }
  }, [factory, text, streaming]);
  React.useEffect(
    () => () => {
      if (timer.current !== null) {
        clearTimeout(timer.current);
      }
    },
    []
  );

  if (factory === null) {
    return <div className="betty-Markdown betty-Markdown-plain">{text}</div>;
  }
  return <div className="betty-Markdown" ref={host} />;
}
