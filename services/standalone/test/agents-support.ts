import { expect } from 'vitest';
import { clientFor } from './client';
import { type RunningService, standaloneProcess } from './harness';
import { type LedgerEntry, micros } from './money';

/**
 * What the agent-client suites (issue 27) share: the service as `pnpm start` runs it (its bundle, in a process of
 * its own) with no provider configured, so that live keys are served by the simulator at the public price and the
 * whole suite runs offline; a customer with credit and a live key, and one with a test key; the balance and the
 * ledger as the customer and the operator read them.
 */

/** The providers' usual variables: none may reach the service, or a live key would call a real provider. */
const PROVIDER_VARIABLES = ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'GEMINI_API_KEY', 'GEMINI_BASE_URL', 'MODELS_FILE', 'CHAT_UPSTREAM'];

export const CHAT_SCOPES = ['chat:read', 'chat:write'];

export async function startForClients(): Promise<RunningService> {
  const saved = new Map(PROVIDER_VARIABLES.map((name) => [name, process.env[name]] as const));
  for (const name of PROVIDER_VARIABLES) delete process.env[name];
  try {
    // The simulator's words are not paced: nothing here leaves a stream midway.
    return await standaloneProcess({ CHAT_SIMULATOR_WORD_DELAY_MS: '0' });
  } finally {
    for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
  }
}

export interface Customer {
  orgId: string;
  key: string;
}

export function customersOf(service: RunningService) {
  const api = clientFor(service);
  /** Enterprise, so that a suite's few hundred requests stay within the chat limits. */
  const newCustomer = (mode: 'live' | 'test'): Promise<Customer> =>
    api.newCustomer({
      tier: 'enterprise',
      ...(mode === 'live' ? { credit: 50 } : {}),
      scopes: CHAT_SCOPES,
      key: { rate_limit_per_minute: 100_000, ...(mode === 'test' ? { mode: 'test' } : {}) },
    });

  /** The balance as the customer reads it, in micro-USD. */
  async function balance(key: string): Promise<{ available: number; reserved: number }> {
    const res = await api.call('GET', '/v1/account/balance', { token: key });
    expect(res.status).toBe(200);
    return { available: micros(res.body.available), reserved: micros(res.body.reserved) };
  }

  /** The organization's ledger, newest first, as the operator reads it (all of it: a suite makes a few hundred entries). */
  async function ledger(orgId: string): Promise<Array<LedgerEntry & { id: string }>> {
    const entries: Array<LedgerEntry & { id: string }> = [];
    for (let after: string | undefined; ; ) {
      const page = await api.admin('GET', `/organizations/${orgId}/ledger?limit=100${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      entries.push(...page.body.data);
      if (!page.body.has_more) return entries;
      after = page.body.data.at(-1).id;
    }
  }

  /**
   * Watches what one piece of client work costs: `charged()` is what the organization's balance dropped by, and
   * the ledger's captures and releases since (one capture per completion the service ran, a release per refused
   * or failed one); nothing may stay reserved.
   */
  async function meter(customer: Customer) {
    const before = await balance(customer.key);
    const seen = new Set((await ledger(customer.orgId)).map((e) => e.id));
    return {
      async charged() {
        const after = await balance(customer.key);
        expect(after.reserved).toBe(0);
        const fresh = (await ledger(customer.orgId)).filter((e) => !seen.has(e.id));
        return {
          micros: before.available - after.available,
          captures: fresh.filter((e) => e.type === 'capture').map((e) => micros(e.charged)),
          releases: fresh.filter((e) => e.type === 'release').length,
        };
      },
    };
  }

  return { api, newCustomer, balance, ledger, meter };
}
