/**
 * The header's cluster picker and status dot over a fake server (the REST helper answers from
 * what the test says the server holds): the dot is the selected cluster's health, not the chat
 * socket's; a failing cluster shows its cause in words and the server's line in the tooltip,
 * escaped; the list is read again when the picker is focused and every {@link CLUSTERS_POLL_MS}.
 */
import * as React from 'react';
import { act } from 'react';

import { BettyAPI } from '../src/api';
import { CLUSTERS_POLL_MS, HEALTH_POLL_MS, healthDot } from '../src/clusterStatus';
import { Header, siteRefuses } from '../src/components/Header';
import { ICluster, IClusterHealth } from '../src/models';
import { requestAPI } from '../src/request';
import { SocketStatus } from '../src/socket';
import { allByTestId, byTestId, render, settle, useFakeClock } from './render';

jest.mock('../src/request', () => ({
  ...jest.requireActual('../src/request'),
  requestAPI: jest.fn()
}));

const DEV: ICluster = {
  name: 'betty-dev',
  transport: 'ssh',
  host: 'betty-dev',
  default: true,
  environments: []
};
const NOWHERE: ICluster = {
  name: 'nowhere',
  transport: 'ssh',
  host: 'nowhere',
  default: false,
  environments: []
};
const HOSTILE = 'no-such-host.invalid: Name or service not known <img src=x onerror="window.__pwned=1">\u202egpj';

function healthy(cluster: string): IClusterHealth {
  return { cluster, ok: true, problem: null, message: `${cluster}: reachable, Slurm answers`, checked_at: 1 };
}

/** Betty's cluster routes as the header reads them. */
class FakeServer {
  calls: string[] = [];
  clusters: ICluster[] = [DEV];
  health: Record<string, IClusterHealth> = { 'betty-dev': healthy('betty-dev') };

  answer = async (endpoint: string): Promise<unknown> => {
    this.calls.push(endpoint);
    if (endpoint === 'clusters') {
      return { clusters: [...this.clusters] };
    }
    const name = decodeURIComponent(endpoint.replace(/^clusters\/(.*)\/health$/, '$1'));
    return this.health[name];
  };

  count(endpoint: string): number {
    return this.calls.filter(call => call === endpoint).length;
  }
}

let server: FakeServer;

useFakeClock();
beforeEach(() => {
  server = new FakeServer();
  (requestAPI as jest.Mock).mockImplementation(server.answer);
});

function header(cluster: string | null, status: SocketStatus = 'open'): JSX.Element {
  return (
    <Header
      api={new BettyAPI()}
      clusters={[DEV]}
      cluster={cluster}
      mode="confirm"
      status={status}
      onCluster={jest.fn()}
      onMode={jest.fn()}
      onNewChat={jest.fn()}
    />
  );
}

async function shown(cluster: string | null, status: SocketStatus = 'open') {
  const rendered = render(header(cluster, status));
  await settle();
  return rendered;
}

function dotOf(container: HTMLElement): HTMLElement {
  return byTestId(container, 'betty-cluster-health');
}

describe('Header: the status dot', () => {
  it('is green with the check in its tooltip when the selected cluster answers', async () => {
    const { container } = await shown('betty-dev');
    const dot = dotOf(container);
    expect(dot.dataset.health).toBe('ok');
    expect(dot.textContent).toBe('●');
    expect(dot.title).toBe('betty-dev: reachable, Slurm answers');
    expect(allByTestId(container, 'betty-cluster-problem')).toHaveLength(0);
    expect(server.count('clusters/betty-dev/health')).toBe(1);
  });

  it('says the cause beside it and the server line in the tooltip, escaped, when the cluster fails', async () => {
    server.health['betty-dev'] = {
      cluster: 'betty-dev', ok: false, problem: 'host-unknown', message: HOSTILE, checked_at: 1
    };
    const { container } = await shown('betty-dev');
    const dot = dotOf(container);
    expect(dot.dataset.health).toBe('failing');
    expect(dot.dataset.problem).toBe('host-unknown');
    const cause =
      'host not found: no-such-host.invalid: Name or service not known ' +
      '<img src=x onerror="window.__pwned=1">\\u202egpj';
    expect(dot.title).toBe(cause);
    expect(byTestId(container, 'betty-cluster-problem').textContent).toBe(cause);
    expect(container.querySelector('img')).toBeNull();
    expect((window as { __pwned?: number }).__pwned).toBeUndefined();
  });

  it.each([
    ['host-key-changed', 'host key changed'],
    ['host-key-unknown', 'host key not trusted yet'],
    ['refused', 'connection refused'],
    ['slurm', 'Slurm not answering']
  ] as const)('names %s as "%s"', (problem, words) => {
    const dot = healthDot('c', { cluster: 'c', ok: false, problem, message: 'why', checked_at: 1 });
    expect(dot).toEqual({ state: 'failing', label: words, tooltip: `${words}: why` });
  });

  it('is "checking" until the first answer, and for a health of another cluster', () => {
    expect(healthDot('betty-dev', null).state).toBe('checking');
    expect(healthDot('nowhere', healthy('betty-dev')).state).toBe('checking');
    expect(healthDot(null, null).tooltip).toBe('No cluster selected');
  });

  it('reports the cluster even while the chat socket reconnects, which is said apart', async () => {
    const { container } = await shown('betty-dev', 'reconnecting');
    expect(dotOf(container).dataset.health).toBe('ok');
    expect(byTestId(container, 'betty-connection').textContent).toBe('chat reconnecting…');
  });

  it('checks the selected cluster again every HEALTH_POLL_MS, and the new one when it changes', async () => {
    const rendered = await shown('betty-dev');
    await settle(HEALTH_POLL_MS);
    expect(server.count('clusters/betty-dev/health')).toBe(2);
    server.health['nowhere'] = {
      cluster: 'nowhere', ok: false, problem: 'refused', message: 'nowhere:22 refused the connection', checked_at: 2
    };
    rendered.rerender(header('nowhere'));
    await settle();
    expect(byTestId(rendered.container, 'betty-cluster-problem').textContent).toBe(
      'connection refused: nowhere:22 refused the connection'
    );
  });

  it('says the server did not answer when the health read fails', async () => {
    (requestAPI as jest.Mock).mockImplementation(async (endpoint: string) => {
      if (endpoint.endsWith('/health')) {
        throw new Error('Bad Gateway');
      }
      return { clusters: [DEV] };
    });
    const { container } = await shown('betty-dev');
    expect(dotOf(container).dataset.health).toBe('failing');
    expect(dotOf(container).title).toContain("Jupyter did not answer Betty's health check: Bad Gateway");
  });
});

describe('Header: the cluster picker', () => {
  function options(container: HTMLElement): string[] {
    return Array.from(byTestId<HTMLSelectElement>(container, 'betty-cluster-picker').options).map(o => o.value);
  }

  it('lists a cluster added on the server once the picker is focused', async () => {
    const { container } = await shown('betty-dev');
    expect(options(container)).toEqual(['betty-dev']);
    server.clusters = [DEV, NOWHERE];
    await act(async () => byTestId(container, 'betty-cluster-picker').focus());
    await settle();
    expect(options(container)).toEqual(['betty-dev', 'nowhere']);
  });

  it('reads the list again every CLUSTERS_POLL_MS', async () => {
    const { container } = await shown('betty-dev');
    server.clusters = [DEV, NOWHERE];
    await settle(CLUSTERS_POLL_MS - 1);
    expect(server.count('clusters')).toBe(0);
    await settle(1);
    expect(server.count('clusters')).toBe(1);
    expect(options(container)).toEqual(['betty-dev', 'nowhere']);
    expect(allByTestId(container, 'betty-cluster-health')).toHaveLength(1);
  });
});

describe('Header: the mode switch under a site policy', () => {
  it('disables the modes the site does not allow, saying why, and never asks for them', async () => {
    const onMode = jest.fn();
    const { container } = render(
      <Header
        clusters={[DEV]}
        cluster="betty-dev"
        mode="confirm"
        allowedModes={['off', 'propose', 'confirm']}
        sitePolicy="/etc/betty/policy.json"
        status="open"
        onCluster={jest.fn()}
        onMode={onMode}
        onNewChat={jest.fn()}
      />
    );
    await settle();
    const auto = byTestId(container, 'betty-mode-auto') as HTMLButtonElement;
    expect(auto.disabled).toBe(true);
    expect(auto.dataset.siteRefused).toBe('true');
    expect(auto.title).toBe(
      'Your site does not allow auto mode; it allows off, propose, confirm (/etc/betty/policy.json).'
    );
    act(() => auto.click());
    expect(onMode).not.toHaveBeenCalled();
    const propose = byTestId(container, 'betty-mode-propose') as HTMLButtonElement;
    expect(propose.disabled).toBe(false);
    expect(propose.dataset.siteRefused).toBeUndefined();
    act(() => propose.click());
    expect(onMode).toHaveBeenCalledWith('propose');
  });

  it('allows every mode when the server names none', () => {
    expect(siteRefuses('auto', undefined, null)).toBeNull();
    expect(siteRefuses('auto', ['off', 'propose', 'confirm', 'auto'], null)).toBeNull();
    expect(siteRefuses('auto', ['confirm'], null)).toBe('Your site does not allow auto mode; it allows confirm.');
  });
});
