/**
 * "Run on cluster" for the open notebook: the form checks each parameter's name before anything
 * is sent (one line, the typing kept), refuses a notebook with unsaved changes, sends exactly
 * `notebook_submit`'s arguments, and shows hostile text as text.
 */
import * as React from 'react';
import { act } from 'react';

import { EditingContext, IEditing } from '../src/editing';
import { RunNotebookForm } from '../src/components/RunNotebookForm';
import { isParameterName, IRunTexts, runArguments, EMPTY_RUN } from '../src/runNotebook';
import { byTestId, click, render, type } from './render';

/** Choose `value` in a select, as a person would. */
function choose(element: HTMLSelectElement, value: string): void {
  act(() => {
    element.value = value;
    element.dispatchEvent(new Event('change', { bubbles: true }));
  });
}

const HOSTILE = '<img src=x onerror="window.__pwned=1">';
const NOTEBOOK = 'analysis/train.ipynb';

function editing(partitions: string[]): IEditing {
  return {
    repreview: () => Promise.reject(new Error('not here')),
    partitions: () => Promise.resolve(partitions),
    editors: null,
    opensEditing: () => false
  };
}

async function form(
  options: {
    unsaved?: boolean;
    start?: jest.Mock;
    notebook?: string;
    partitions?: string[];
    environments?: string[];
    kept?: IRunTexts;
    onTexts?: (texts: IRunTexts) => void;
  } = {}
) {
  const start = options.start ?? jest.fn(() => Promise.resolve());
  const close = jest.fn();
  const rendered = render(
    <EditingContext.Provider value={editing(options.partitions ?? ['debug', 'gpu'])}>
      <RunNotebookForm
        notebook={options.notebook ?? NOTEBOOK}
        cluster="dev"
        environments={options.environments}
        kept={options.kept}
        onTexts={options.onTexts}
        unsaved={() => options.unsaved ?? false}
        onStart={start}
        onClose={close}
      />
    </EditingContext.Provider>
  );
  await act(async () => undefined); // the partitions arrive
  expect(byTestId(rendered.container, 'betty-run-partition').querySelectorAll('option')).toHaveLength(
    (options.partitions ?? ['debug', 'gpu']).length
  );
  return { container: rendered.container, start, close };
}

describe('runArguments', () => {
  it('turns the texts into notebook_submit arguments, skipping blank lines', () => {
    const texts = {
      ...EMPTY_RUN,
      partition: 'gpu',
      time: '30',
      gpus: '1',
      env: 'betty',
      params: 'lr=3e-4\n\n tag = "a=b" '
    };
    expect(runArguments(NOTEBOOK, texts)).toEqual({
      args: {
        notebook: NOTEBOOK,
        partition: 'gpu',
        time: 30,
        gpus: 1,
        env: 'betty',
        params: ['lr=3e-4', 'tag="a=b"']
      }
    });
  });

  it('names the first bad parameter line in one line', () => {
    const bad = runArguments(NOTEBOOK, { ...EMPTY_RUN, partition: 'debug', params: 'lr=1\n1x=2' });
    expect(bad).toEqual({
      error: 'Parameter line 2: "1x" is not a Python name; write one name=value a line.'
    });
    expect(
      'error' in runArguments(NOTEBOOK, { ...EMPTY_RUN, partition: 'debug', params: 'lr' })
    ).toBe(true);
    expect('error' in runArguments(NOTEBOOK, { ...EMPTY_RUN, partition: 'debug', time: '0' })).toBe(
      true
    );
    expect(
      'error' in runArguments(NOTEBOOK, { ...EMPTY_RUN, partition: 'debug', gpus: '-1' })
    ).toBe(true);
  });

  it('takes Python identifiers only, keywords refused', () => {
    expect(isParameterName('learning_rate2')).toBe(true);
    expect(isParameterName('_x')).toBe(true);
    for (const bad of ['class', 'None', '__class__', 'a-b', 'a b', '', 'é', '2x']) {
      expect(isParameterName(bad)).toBe(false);
    }
  });
});

describe('RunNotebookForm', () => {
  it('sends the checked arguments once and closes', async () => {
    const { container, start, close } = await form();
    type(byTestId(container, 'betty-run-time'), '30');
    type(byTestId(container, 'betty-run-params'), 'lr=3e-4\nepochs=2');
    await click(byTestId(container, 'betty-run-start'));
    expect(start).toHaveBeenCalledWith({
      notebook: NOTEBOOK,
      partition: 'debug',
      time: 30,
      gpus: 0,
      params: ['lr=3e-4', 'epochs=2']
    });
    expect(close).toHaveBeenCalled();
  });

  it('refuses a bad name in one line, sends nothing and keeps what was typed', async () => {
    const { container, start } = await form();
    const typed = `lr=3e-4\n${HOSTILE}=1`;
    type(byTestId(container, 'betty-run-params'), typed);
    await click(byTestId(container, 'betty-run-start'));
    expect(start).not.toHaveBeenCalled();
    const error = byTestId(container, 'betty-run-error');
    expect(error.textContent).toContain('Parameter line 2:');
    expect(error.textContent).not.toContain('\n');
    expect(error.querySelector('img')).toBeNull();
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-run-params').value).toBe(typed);
  });

  it('refuses a notebook with unsaved changes', async () => {
    const { container, start } = await form({ unsaved: true });
    type(byTestId(container, 'betty-run-params'), 'lr=1');
    await click(byTestId(container, 'betty-run-start'));
    expect(start).not.toHaveBeenCalled();
    expect(byTestId(container, 'betty-run-error').textContent).toBe(
      `Save ${NOTEBOOK} first: the cluster runs the notebook as saved.`
    );
    expect(byTestId<HTMLTextAreaElement>(container, 'betty-run-params').value).toBe('lr=1');
  });

  it("shows the server's refusal as text and keeps the form", async () => {
    const start = jest.fn(() => Promise.reject(new Error(`no environment ${HOSTILE}`)));
    const { container, close } = await form({ start, notebook: `${HOSTILE}.ipynb` });
    type(byTestId(container, 'betty-run-params'), 'lr=1');
    await click(byTestId(container, 'betty-run-start'));
    expect(start).toHaveBeenCalledWith(expect.objectContaining({ notebook: `${HOSTILE}.ipynb` }));
    expect(close).not.toHaveBeenCalled();
    expect(byTestId(container, 'betty-run-error').textContent).toBe(`no environment ${HOSTILE}`);
    expect(container.querySelector('img')).toBeNull();
    expect(container.textContent).toContain(`Run ${HOSTILE}.ipynb on the cluster`);
  });

  it("offers the cluster profile's environments, the first chosen, and the node's python3", async () => {
    const { container, start } = await form({ environments: ['betty', HOSTILE] });
    const env = byTestId<HTMLSelectElement>(container, 'betty-run-env');
    expect(env.tagName).toBe('SELECT');
    expect(Array.from(env.options).map(option => option.value)).toEqual(['betty', HOSTILE, '']);
    expect(env.value).toBe('betty');
    expect(container.querySelector('img')).toBeNull();
    await click(byTestId(container, 'betty-run-start'));
    expect(start).toHaveBeenLastCalledWith(expect.objectContaining({ env: 'betty' }));
    choose(env, '');
    await click(byTestId(container, 'betty-run-start'));
    expect(start.mock.calls[1][0]).not.toHaveProperty('env');
  });

  it('opens again with what was typed when it was closed (a refused run is asked again, not retyped)', async () => {
    const onTexts = jest.fn();
    const first = await form({ environments: ['betty', 'torch'], onTexts });
    type(byTestId(first.container, 'betty-run-time'), '15');
    type(byTestId(first.container, 'betty-run-params'), 'lr=3e-4\nepochs=2');
    choose(byTestId<HTMLSelectElement>(first.container, 'betty-run-env'), 'torch');
    await click(byTestId(first.container, 'betty-run-start'));
    expect(first.close).toHaveBeenCalled();
    const kept = onTexts.mock.calls[onTexts.mock.calls.length - 1][0] as IRunTexts;
    const again = await form({ environments: ['betty', 'torch'], kept });
    expect(byTestId<HTMLInputElement>(again.container, 'betty-run-time').value).toBe('15');
    expect(byTestId<HTMLTextAreaElement>(again.container, 'betty-run-params').value).toBe(
      'lr=3e-4\nepochs=2'
    );
    expect(byTestId<HTMLSelectElement>(again.container, 'betty-run-env').value).toBe('torch');
  });
});
