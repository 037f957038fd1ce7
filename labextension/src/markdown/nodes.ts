/**
 * The data markdown's inline syntax is parsed into (by `inlines.ts`, with `emphasis.ts`
 * resolving `*` and `_` runs); `safe.tsx` shows each kind.
 */

/** A run of inline content. */
export type Inline =
  | { kind: 'text'; text: string }
  | { kind: 'code'; text: string }
  | { kind: 'break' }
  | { kind: 'emphasis' | 'strong' | 'strike'; children: Inline[] }
  | { kind: 'link'; url: string; title: string; children: Inline[] }
  | { kind: 'image'; url: string; title: string; alt: string };
