/**
 * The cost meter: each budgeted account's use against its budget, read when shown and after each
 * submission; "not known" where Slurm keeps usage private; nothing without budgets.
 */
import * as React from 'react';
import { act } from 'react';

import { accountWords, CostMeter, ICostMeterProps } from '../src/components/CostMeter';
import { IAccountUse, ISitePolicyView } from '../src/models';
import { allByTestId, byTestId, render, settle } from './render';

const LAB: IAccountUse = {
  account: 'lab',
  gpu_hours_used: 41,
  gpu_hours_budget: 500,
  cpu_hours_used: 8.25,
  cpu_hours_budget: 100,
  known: true,
  why: ''
};
const HIDDEN: IAccountUse = {
  account: 'chem',
  gpu_hours_used: null,
  gpu_hours_budget: 100,
  cpu_hours_used: null,
  cpu_hours_budget: null,
  known: false,
  why: "Slurm keeps other users' usage private here (PrivateData=usage), so only your own share could be read"
};

function view(usage?: IAccountUse[]): ISitePolicyView {
  return { source: '/etc/betty/policy.json', fields: [], modes: ['confirm'], mcp: true, usage };
}

function renderMeter(props: Partial<ICostMeterProps> & Pick<ICostMeterProps, 'loadUsage'>) {
  const all = (next: Partial<ICostMeterProps>) => (
    <CostMeter visible={true} submissions={0} {...props} {...next} />
  );
  const rendered = render(all({}));
  return {
    ...rendered,
    rerender: (next: Partial<ICostMeterProps>) => rendered.rerender(all(next))
  };
}

describe('CostMeter', () => {
  it('shows each account used of its budget, and not known where Slurm keeps usage private', async () => {
    const loadUsage = jest.fn(async () => view([LAB, HIDDEN]));
    const { container } = renderMeter({ loadUsage });
    await settle();
    const [lab, chem] = allByTestId(container, 'betty-cost-account');
    expect(lab.dataset.known).toBe('true');
    expect(byTestId(lab, 'betty-cost-words').textContent).toBe(
      '41.0 of 500 GPU-hours, 8.3 of 100 CPU-hours used this month'
    );
    expect(lab.querySelectorAll('meter')).toHaveLength(2);
    expect(chem.dataset.known).toBe('false');
    expect(byTestId(chem, 'betty-cost-words').textContent).toMatch(
      /^not known: .*PrivateData=usage/
    );
    expect(chem.querySelectorAll('meter')).toHaveLength(0);
  });

  it('reads again when shown and after each submission, never while hidden', async () => {
    const loadUsage = jest.fn(async () => view([LAB]));
    const { rerender } = renderMeter({ loadUsage, visible: false });
    await settle();
    expect(loadUsage).not.toHaveBeenCalled();
    await act(async () => rerender({ visible: true }));
    expect(loadUsage).toHaveBeenCalledTimes(1);
    await act(async () => rerender({ visible: true, submissions: 1 }));
    expect(loadUsage).toHaveBeenCalledTimes(2);
  });

  it('shows nothing where the site sets no budgets, and a failed read in one line', async () => {
    const none = renderMeter({ loadUsage: async () => view() });
    await settle();
    expect(allByTestId(none.container, 'betty-cost-meter')).toHaveLength(0);
    const failing = renderMeter({
      loadUsage: async () => {
        throw new Error('sacct: error: Problem talking to the database');
      }
    });
    await settle();
    expect(byTestId(failing.container, 'betty-cost-problem').textContent).toBe(
      'The cost meter could not be read: sacct: error: Problem talking to the database'
    );
  });

  it('words a budget of GPU-hours alone', () => {
    expect(accountWords({ ...LAB, cpu_hours_budget: null })).toBe(
      '41.0 of 500 GPU-hours used this month'
    );
  });
});
