/**
 * What every poll of the panel does, checked the same way for each: nothing is read before the
 * panel is attached, one read at once, one per {@link POLL_MS} while attached, none once disposed.
 */
import { Widget } from '@lumino/widgets';
import { act } from 'react';

import { BettyAPI } from '../src/api';
import { BettyModel } from '../src/model';
import { BettyPanel } from '../src/panel';
import { POLL_MS } from '../src/poll';
import { settle } from './render';

/** Check that a panel reads while attached (`reads` counts the reads) and that `running` ends with it. */
export async function expectReadsWhileAttached(
  reads: () => number,
  running: (model: BettyModel) => boolean
): Promise<void> {
  const model = new BettyModel({ api: new BettyAPI() });
  const panel = new BettyPanel({ model, open: jest.fn() });
  await settle(POLL_MS * 2);
  expect(reads()).toBe(0);
  await act(async () => Widget.attach(panel, document.body));
  await settle();
  expect(reads()).toBe(1);
  await settle(POLL_MS);
  expect(reads()).toBe(2);
  await act(async () => panel.dispose());
  await settle(POLL_MS * 5);
  expect(reads()).toBe(2);
  expect(running(model)).toBe(false);
}
