/**
 * The context chip and the approved cell changes: what the chip shows is what is sent (nothing
 * once removed), and a change never overwrites what the person typed nor runs other code.
 */
import * as React from 'react';
import { act } from 'react';

import { BettyAPI } from '../src/api';
import { ChatView } from '../src/components/ChatView';
import { ICellChangeJson } from '../src/contract/serverApi';
import { sha256Hex } from '../src/digest';
import { applyChange, IChangeableTab } from '../src/notebookChanges';
import { bulletinOf, NotebookContext } from '../src/notebookContext';
import { emptyTranscript } from '../src/transcript';
import { byTestId, click, render, type } from './render';

const HOSTILE_ERROR = {
  output_type: 'error',
  ename: 'ValueError',
  evalue: '\u202egnp.exe <img src=x onerror=alert(1)>'
};

function notebookTab(sources: string[], active = 1, types: string[] = []) {
  const cells = sources.map((source, i) => {
    let text = source;
    return {
      type: types[i] ?? 'code',
      sharedModel: {
        getSource: () => text,
        setSource: (next: string) => void (text = next)
      },
      toJSON: () => ({
        source: text,
        outputs: text.startsWith('raise') ? [HOSTILE_ERROR] : []
      })
    };
  });
  const list = {
    get length() {
      return cells.length;
    },
    get: (i: number) => cells[i]
  };
  const insertCell = (index: number, cell: { cell_type: string; source: string }) => {
    let text = cell.source;
    cells.splice(index, 0, {
      type: cell.cell_type,
      sharedModel: {
        getSource: () => text,
        setSource: (next: string) => void (text = next)
      },
      toJSON: () => ({ source: text, outputs: [] })
    });
  };
  return {
    context: { path: 'analysis/train.ipynb' },
    content: {
      activeCellIndex: active,
      deselectAll: jest.fn(),
      model: { cells: list, sharedModel: { insertCell } }
    },
    sources: () => cells.map(c => c.sharedModel.getSource())
  };
}

const place = { directory: 'analysis', branch: 'main', dirty: true };

describe('the context bulletin', () => {
  it('names the notebook, its cell, folder, branch and recent errors', () => {
    const tab = notebookTab(['import numpy', 'raise ValueError()']);
    expect(bulletinOf(tab, place)).toEqual({
      notebook: 'analysis/train.ipynb',
      cell: 1,
      directory: 'analysis',
      branch: 'main',
      dirty: true,
      errors: ['ValueError: \u202egnp.exe <img src=x onerror=alert(1)>']
    });
    expect(bulletinOf({ context: { path: 'notes.md' } }, place)).toBeNull();
  });

  it('is shown as a chip; sent as shown; removed, none of it is sent', async () => {
    const tab = notebookTab(['import numpy', 'raise ValueError()']);
    const api = {
      workingPlace: jest.fn().mockResolvedValue(place)
    } as unknown as BettyAPI;
    const context = new NotebookContext(api, () => tab);
    await act(async () => context.update());
    const onSend = jest.fn();
    const props = {
      transcript: emptyTranscript('s'),
      hasModel: true,
      context,
      onSend,
      onStop: jest.fn(),
      onDecide: jest.fn(),
      onOpen: jest.fn()
    };
    const { container } = render(<ChatView {...props} />);
    const chip = byTestId(container, 'betty-context-chip');
    expect(chip.textContent).toContain('analysis/train.ipynb, cell 1');
    expect(chip.textContent).toContain('git main (uncommitted changes)');
    expect(chip.textContent).toContain('\\u202egnp.exe <img src=x onerror=alert(1)>');
    expect(chip.querySelector('img')).toBeNull();

    type(byTestId<HTMLTextAreaElement>(container, 'betty-prompt'), 'why does it fail?');
    await click(byTestId(container, 'betty-send'));
    expect(onSend).toHaveBeenLastCalledWith('why does it fail?', context.bulletin);

    await click(byTestId(container, 'betty-context-chip-remove'));
    expect(container.querySelector('[data-testid="betty-context-chip"]')).toBeNull();
    type(byTestId<HTMLTextAreaElement>(container, 'betty-prompt'), 'and now?');
    await click(byTestId(container, 'betty-send'));
    expect(onSend).toHaveBeenLastCalledWith('and now?', null);
    expect(byTestId(container, 'betty-context-chip')).toBeTruthy(); // back for the next message
  });
});

function change(
  action: ICellChangeJson['action'],
  index: number,
  source: string,
  before: string | null,
  cellType = 'code'
): ICellChangeJson {
  return {
    id: 'change-1',
    path: 'analysis/train.ipynb',
    action,
    index,
    source,
    cell_type: cellType,
    before,
    sha256: action === 'run' ? sha256Hex(source) : null
  };
}

describe('an approved cell change', () => {
  it('replaces a cell that still holds what the person was shown', async () => {
    const tab = notebookTab(['import numpy', 'lr = 1e-3']);
    const run = jest.fn();
    const result = await applyChange(
      tab as unknown as IChangeableTab,
      change('replace', 1, 'lr = 3e-4', 'lr = 1e-3'),
      run
    );
    expect([result, tab.sources()]).toEqual(['replaced', ['import numpy', 'lr = 3e-4']]);
  });

  it('goes beside a cell the person changed since, keeping what they typed', async () => {
    const tab = notebookTab(['import numpy', 'lr = 5e-4  # typed, not saved']);
    const result = await applyChange(
      tab as unknown as IChangeableTab,
      change('replace', 1, 'lr = 3e-4', 'lr = 1e-3'),
      jest.fn()
    );
    expect(result).toMatch(/^inserted beside/);
    expect(tab.sources()).toEqual(['import numpy', 'lr = 5e-4  # typed, not saved', 'lr = 3e-4']);
  });

  it('replaces a markdown cell only while it is still markdown: never a code cell', async () => {
    const tab = notebookTab(['# Title', '# Title'], 0, ['code', 'markdown']);
    const result = await applyChange(
      tab as unknown as IChangeableTab,
      change('replace', 0, '# Results', '# Title', 'markdown'),
      jest.fn()
    );
    expect(result).toMatch(/^inserted beside/);
    expect(tab.sources()).toEqual(['# Title', '# Results', '# Title']);
  });

  it('runs a cell only while it holds exactly the approved code', async () => {
    const tab = notebookTab(['import numpy', 'print(1)'], 0);
    const run = jest.fn().mockResolvedValue(undefined);
    expect(
      await applyChange(
        tab as unknown as IChangeableTab,
        change('run', 1, 'print(2)', 'print(2)'),
        run
      )
    ).toMatch(/^not run/);
    expect(run).not.toHaveBeenCalled();
    expect(
      await applyChange(
        tab as unknown as IChangeableTab,
        change('run', 1, 'print(1)', 'print(1)'),
        run
      )
    ).toBe('ran');
    expect([run.mock.calls.length, tab.content.activeCellIndex]).toEqual([1, 1]);
  });

  it('runs nothing whose digest differs from the approved one, however small the change', async () => {
    const approved = "print('hello')";
    const run = jest.fn().mockResolvedValue(undefined);
    const held = [
      "print('hello') ",
      "print('hello')\n",
      "print('hello')\r",
      "print('hel\u200blo')",
      "print('he\u0301llo')",
      "import os; os.system('id')",
      ''
    ];
    for (const source of held) {
      const tab = notebookTab(['import numpy', source]);
      expect(
        await applyChange(tab as unknown as IChangeableTab, change('run', 1, approved, approved), run)
      ).toBe(
        "not run: cell 1 no longer holds the approved code (the open cell is not the card's: save it, then ask again)"
      );
    }
    const tab = notebookTab(['import numpy']);
    expect(
      await applyChange(tab as unknown as IChangeableTab, change('run', 1, approved, approved), run)
    ).toMatch(/^not run: cell 1 no longer holds/);
    expect(run).not.toHaveBeenCalled();
  });

  it('runs nothing without a well-formed approved digest, even when the source matches', async () => {
    const run = jest.fn().mockResolvedValue(undefined);
    const approved = 'print(1)';
    const forged = [null, '', 'not-a-digest', sha256Hex(approved).toUpperCase(), sha256Hex(approved) + '0'];
    for (const sha256 of forged) {
      const tab = notebookTab(['import numpy', approved]);
      const asked = { ...change('run', 1, approved, approved), sha256 };
      expect(await applyChange(tab as unknown as IChangeableTab, asked, run)).toMatch(/^not run: cell 1/);
    }
    const tab = notebookTab(['import numpy', 'planted()']);
    const lying = { ...change('run', 1, 'planted()', 'planted()'), sha256: sha256Hex('print(1)') };
    expect(await applyChange(tab as unknown as IChangeableTab, lying, run)).toMatch(/^not run/);
    expect(run).not.toHaveBeenCalled();
  });
});

describe('the digest of approved code', () => {
  it('is the SHA-256 of the UTF-8 bytes, as the server computes it', () => {
    const { createHash } = require('crypto') as typeof import('crypto');
    const texts = [
      '',
      'abc',
      'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
      'x'.repeat(55),
      'x'.repeat(56),
      'x'.repeat(64),
      'x'.repeat(100_000),
      "print('héllo') # ünïcödé 😀\n\t\r\n"
    ];
    for (const text of texts) {
      expect(sha256Hex(text)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
    }
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
