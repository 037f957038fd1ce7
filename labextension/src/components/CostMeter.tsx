/**
 * The cost meter, atop the Jobs tab: each account the site budgets, what it used this month
 * against its budget in GPU-hours and CPU-hours (as `GET policy?usage=1` reads them from
 * accounting), read again when the tab is shown and after each submission. Where Slurm keeps
 * other users' usage private, the account's use is "not known", never the person's own share
 * shown as the account's. Nothing shows where the site sets no budgets.
 */
import * as React from 'react';

import { IAccountUse, ISitePolicyView } from '../models';
import { visibleText } from '../safe';

/** Props of {@link CostMeter}. */
export interface ICostMeterProps {
  /** Whether the meter is on screen: it reads only then. */
  visible: boolean;
  /** How many submissions the chat has made: each one reads the meter again. */
  submissions: number;
  loadUsage: () => Promise<ISitePolicyView>;
}

/** One figure of an account's use: `41.0 of 500 GPU-hours`, or null where the site sets no budget for it. */
export function budgetFigure(
  used: number | null,
  budget: number | null,
  unit: string
): { words: string; share: number } | null {
  if (budget === null) {
    return null;
  }
  const spent = used ?? 0;
  return {
    words: `${spent.toFixed(1)} of ${budget} ${unit}`,
    share: budget > 0 ? Math.min(spent / budget, 1) : 1
  };
}

/** An account's use this month in words, or why it is not known. */
export function accountWords(use: IAccountUse): string {
  if (!use.known) {
    return `not known: ${use.why}`;
  }
  const figures = [
    budgetFigure(use.gpu_hours_used, use.gpu_hours_budget, 'GPU-hours'),
    budgetFigure(use.cpu_hours_used, use.cpu_hours_budget, 'CPU-hours')
  ].filter(figure => figure !== null);
  return `${figures.map(figure => figure!.words).join(', ')} used this month`;
}

/** The cost meter; nothing where the site sets no budgets. */
export function CostMeter({
  visible,
  submissions,
  loadUsage
}: ICostMeterProps): JSX.Element | null {
  const [usage, setUsage] = React.useState<IAccountUse[] | null>(null);
  const [problem, setProblem] = React.useState<string | null>(null);
  React.useEffect(() => {
    if (!visible) {
      return undefined;
    }
    let shown = true;
    loadUsage().then(
      view => {
        if (shown) {
          setUsage(view.usage ?? []);
          setProblem(null);
        }
      },
      (reason: Error) => shown && setProblem(reason.message ?? String(reason))
    );
    return () => {
      shown = false;
    };
  }, [visible, submissions, loadUsage]);
  if ((usage === null || usage.length === 0) && problem === null) {
    return null;
  }
  return (
    <section
      className="betty-CostMeter"
      data-testid="betty-cost-meter"
      aria-label="Cost this month"
    >
      {(usage ?? []).map(use => (
        <div
          key={use.account}
          className="betty-CostMeter-account"
          data-testid="betty-cost-account"
          data-account={use.account}
          data-known={use.known ? 'true' : 'false'}
        >
          <span className="betty-CostMeter-name">{visibleText(use.account)}</span>{' '}
          <AccountBars use={use} />
          <span className="betty-CostMeter-words" data-testid="betty-cost-words">
            {visibleText(accountWords(use))}
          </span>
        </div>
      ))}
      {problem !== null && (
        <div className="betty-CostMeter-problem" role="alert" data-testid="betty-cost-problem">
          The cost meter could not be read: {visibleText(problem)}
        </div>
      )}
    </section>
  );
}

function AccountBars({ use }: { use: IAccountUse }): JSX.Element | null {
  if (!use.known) {
    return null;
  }
  const figures = [
    budgetFigure(use.gpu_hours_used, use.gpu_hours_budget, 'GPU-hours'),
    budgetFigure(use.cpu_hours_used, use.cpu_hours_budget, 'CPU-hours')
  ].filter(figure => figure !== null);
  return (
    <>
      {figures.map(figure => (
        <meter
          key={figure!.words}
          className="betty-CostMeter-bar"
          min={0}
          max={1}
          high={0.9}
          value={figure!.share}
          title={figure!.words}
        />
      ))}{' '}
    </>
  );
}
