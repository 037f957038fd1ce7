/**
 * A small harness for React components in jsdom: render into a detached root, find by
 * `data-testid`, click and type the way a person would (through React's own events).
 */
import * as React from 'react';
import { act } from 'react';
import { createRoot, Root } from 'react-dom/client';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

/** A rendered component. */
export interface IRendered {
  container: HTMLElement;
  rerender(element: React.ReactElement): void;
  unmount(): void;
}

const mounted: IRendered[] = [];

/** Render `element` into a fresh container attached to the document. */
export function render(element: React.ReactElement): IRendered {
  const container = document.createElement('div');
  document.body.appendChild(container);
  let root: Root;
  act(() => {
    root = createRoot(container);
    root.render(element);
  });
  const rendered = {
    container,
    rerender: (next: React.ReactElement) => act(() => root.render(next)),
    unmount: () => {
      act(() => root.unmount());
      container.remove();
    }
  };
  mounted.push(rendered);
  return rendered;
}

afterEach(() => {
  while (mounted.length > 0) {
    mounted.pop()!.unmount();
  }
});

/** The one element with `data-testid` `id`; fails the test when there is none or several. */
export function byTestId<T extends HTMLElement = HTMLElement>(root: ParentNode, id: string): T {
  const found = root.querySelectorAll<T>(`[data-testid="${id}"]`);
  if (found.length !== 1) {
    throw new Error(`expected one [data-testid="${id}"], found ${found.length}`);
  }
  return found[0];
}

/** All elements with `data-testid` `id`. */
export function allByTestId<T extends HTMLElement = HTMLElement>(
  root: ParentNode,
  id: string
): T[] {
  return Array.from(root.querySelectorAll<T>(`[data-testid="${id}"]`));
}

/** Click `element` and let React's effects and promises settle. */
export async function click(element: HTMLElement): Promise<void> {
  await act(async () => {
    element.dispatchEvent(new MouseEvent('click', { bubbles: true }));
  });
}

/** Type `value` into a textarea or input, as a person replacing its text would. */
export function type(element: HTMLTextAreaElement | HTMLInputElement, value: string): void {
  const prototype = Object.getPrototypeOf(element);
  const setter = Object.getOwnPropertyDescriptor(prototype, 'value')!.set!;
  act(() => {
    setter.call(element, value);
    element.dispatchEvent(new Event('input', { bubbles: true }));
  });
}

/** Fake timers in every test of the calling file (call it at the top level of a spec). */
export function useFakeClock(): void {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());
}

/** Let `ms` of time pass (fake time where the test file uses fake timers), and what it sets off settle, inside
 * React's `act`. */
export async function settle(ms = 0): Promise<void> {
  await act(async () => {
    if (fakeTimers()) {
      await jest.advanceTimersByTimeAsync(ms);
    } else {
      await new Promise(resolve => setTimeout(resolve, ms));
    }
  });
}

/** Whether Jest's fake timers replace the real ones now (they put their clock on `setTimeout`). */
function fakeTimers(): boolean {
  return 'clock' in (globalThis.setTimeout as unknown as object);
}
