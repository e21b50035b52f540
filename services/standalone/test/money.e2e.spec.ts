import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService, type Starter, standaloneProcess } from './harness';
import { natsReachable } from './nats';

/**
 * The money suite: a thousand mixed requests at once against one small balance (video creates, chats,
 * streams cut mid-way, deletes of running jobs), with and without processes killed (SIGKILL) in the middle.
 * Afterwards the ledger must add up to the balance, every reservation be settled exactly once, every
 * charge match a usage, every failure and cancellation be refunded, the balance never have gone below
 * zero, every job be final and every webhook event be delivered at least once.
 */

const MICROS_PER_TOKEN = 80;
const VIDEO_MICROS = 400_000; // video-2, 4 seconds at 0.1 USD a second
const micros = (usd: number) => Math.round(usd * 1_000_000);

const modes: [string, Starter, string[]][] = [
  ['standalone process', standaloneProcess, ['standalone']],
  ...((await natsReachable()) ? [['distributed over NATS', distributed, ['billing', 'chat', 'video', 'webhook']] as [string, Starter, string[]]] : []),
];

interface LedgerEntry {
  type: 'credit' | 'reservation' | 'capture' | 'release';
  amount: number;
  charged: number;
  available_after: number;
  reference: string | null;
}

type Kind = 'video' | 'chat' | 'cut-stream' | 'delete';
const KINDS: Kind[] = ['video', 'video', 'video', 'video', 'video', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat'];
KINDS.push('cut-stream', 'cut-stream', 'cut-stream', 'cut-stream', 'delete', 'delete', 'delete');

describe.each(modes)('money and crashes (%s)', (_mode, start, processes) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await httpReceiver();
    service = await start({
      SIM_VIDEO_DURATION_MS: '1500',
      CHAT_SIMULATOR_WORD_DELAY_MS: '2',
      WEBHOOK_MODE: 'development',
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_DELAYS_MS: '0,200,500,1000',
    });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
  });

  async function customer() {
    const scopes = ['video:read', 'video:write', 'video:delete', 'chat:read', 'chat:write', 'webhook:write'];
    const c = await api.newCustomer({ tier: 'enterprise', credit: 3, scopes, key: { rate_limit_per_minute: 100_000 } });
    // The webhook service may answer after the gateway reports ready (distributed).
    await vi.waitFor(
      async () => {
        const hook = await api.call('POST', '/v1/webhooks', {
          token: c.key,
          body: { url: receiver.url, events: ['video.completed', 'video.failed'] },
        });
        expect(hook.status).toBe(200);
      },
      { timeout: 30_000, interval: 250 },
    );
    return c;
  }

  /** Sends `count` requests of mixed kinds all at once (in waves of `wave`), tracking what each did. */
  async function mixedLoad(key: string, count: number, wave: number, during?: () => Promise<void>) {
    const videos = new Set<string>();
    const deleted = new Set<string>();
    const chats = new Map<string, number>();
    const statuses: Record<string, number> = {};
    const count_ = (status: number | string) => (statuses[status] = (statuses[status] ?? 0) + 1);
    // A request a crash cut off may never be answered (its reply was lost with the process): the client gives up.
    const send = (method: string, path: string, body?: unknown, signal = AbortSignal.timeout(30_000)) =>
      fetch(`${service.url}${path}`, {
        method,
        signal,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const one = async (i: number) => {
      const kind = KINDS[i % KINDS.length]!;
      try {
        if (kind === 'video') {
          const res = await send('POST', '/v1/videos', { model: 'video-2', prompt: `A lighthouse at dusk, take ${i}`, seconds: '4', size: '1280x720' });
          count_(res.status);
          const body = (await res.json()) as { id: string };
          if (res.status === 200) videos.add(body.id);
        } else if (kind === 'chat') {
          const res = await send('POST', '/v1/chat/completions', {
            model: 'chat-2',
            max_tokens: 12,
            messages: [{ role: 'user', content: `Question number ${i}?` }],
          });
          count_(res.status);
          const body = (await res.json()) as { id: string; usage: { total_tokens: number } };
          if (res.status === 200) chats.set(body.id, body.usage.total_tokens);
        } else if (kind === 'cut-stream') {
          const abort = new AbortController();
          const res = await send(
            'POST',
            '/v1/chat/completions',
            { model: 'chat-2', stream: true, max_tokens: 400, messages: [{ role: 'user', content: `Tell me a long story ${i}` }] },
            AbortSignal.any([abort.signal, AbortSignal.timeout(30_000)]),
          );
          count_(res.status);
          if (res.status === 200) await res.body!.getReader().read();
          abort.abort();
        } else {
          // Every other video is deleted (most while still running), so that the others complete.
          const victim = [...videos].filter((_, n) => n % 2 === 0).find((id) => !deleted.has(id));
          if (!victim) return;
          deleted.add(victim);
          const res = await send('DELETE', `/v1/videos/${victim}`);
          count_(`delete ${res.status}`);
          await res.arrayBuffer();
        }
      } catch {
        // Cut by a crash or given up: whatever it started must still be settled.
        count_('cut');
      }
    };
    for (let sent = 0; sent < count; sent += wave) {
      const batch = Array.from({ length: Math.min(wave, count - sent) }, (_, j) => one(sent + j));
      if (during && sent >= count / 2 && sent < count / 2 + wave) batch.push(during());
      await Promise.all(batch);
    }
    return { videos, deleted, chats, statuses };
  }

  /** Polls the balance during the load (as the operator: the organization's own limits are for its load), so that a moment below zero would be seen. */
  function watchBalance(orgId: string) {
    const seen: { available: number; reserved: number }[] = [];
    let watching = true;
    const done = (async () => {
      while (watching) {
        const res = await fetch(`${service.url}/admin/v1/organizations/${orgId}/balance`, {
          headers: { authorization: `Bearer ${service.adminToken}` },
        }).catch(() => undefined);
        if (res?.status === 200) {
          const body = (await res.json()) as { available: number; reserved: number };
          seen.push({ available: micros(body.available), reserved: micros(body.reserved) });
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    return {
      async stop() {
        watching = false;
        await done;
        return seen;
      },
    };
  }

  async function ledgerOf(orgId: string): Promise<LedgerEntry[]> {
    const entries: LedgerEntry[] = [];
    for (let after: string | undefined; ; ) {
      const page = await api.admin('GET', `/organizations/${orgId}/ledger?limit=100${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      entries.push(...page.body.data);
      if (!page.body.has_more) return entries;
      after = page.body.data.at(-1).id;
    }
  }

  /** The invariants that must hold once all work is finished, crash or not. */
  async function expectBooksBalance(c: { orgId: string; key: string }, load: Awaited<ReturnType<typeof mixedLoad>>) {
    // Every job final: every video not deleted is completed or failed, and some did complete.
    const finals = new Map<string, string>();
    await vi.waitFor(
      async () => {
        for (const id of load.videos) {
          if (load.deleted.has(id) || finals.has(id)) continue;
          const res = await api.call('GET', `/v1/videos/${id}`, { token: c.key });
          expect(res.status).toBe(200);
          expect(res.body.status).toMatch(/^(completed|failed)$/);
          finals.set(id, res.body.status);
        }
      },
      { timeout: 60_000, interval: 500 },
    );
    expect([...finals.values()]).toContain('completed');
    // No reservation left open (within a minute of any restart).
    await vi.waitFor(
      async () => {
        const balance = await api.admin('GET', `/organizations/${c.orgId}/balance`);
        expect(balance.body).toMatchObject({ reserved: 0 });
      },
      { timeout: 60_000, interval: 250 },
    );

    const ledger = await ledgerOf(c.orgId);
    const balance = await api.admin('GET', `/organizations/${c.orgId}/balance`);
    const credited = ledger.filter((e) => e.type === 'credit').reduce((sum, e) => sum + micros(e.amount), 0);
    const charged = ledger.reduce((sum, e) => sum + micros(e.charged), 0);
    // The ledger sums to the balance, and no entry ever left it below zero.
    expect(micros(balance.body.available)).toBe(credited - charged);
    expect(Math.min(...ledger.map((e) => micros(e.available_after)))).toBeGreaterThanOrEqual(0);

    // Every reservation settled exactly once, never for more than it held.
    const reserved = new Map(ledger.filter((e) => e.type === 'reservation').map((e) => [e.reference!, -micros(e.amount)]));
    const settlements = new Map<string, LedgerEntry[]>();
    for (const e of ledger) {
      if (e.type === 'capture' || e.type === 'release') settlements.set(e.reference!, [...(settlements.get(e.reference!) ?? []), e]);
    }
    expect([...settlements.keys()].sort()).toEqual([...reserved.keys()].sort());
    for (const [reference, held] of reserved) {
      const [settled, ...again] = settlements.get(reference)!;
      expect(again).toEqual([]);
      expect(micros(settled!.charged) + micros(settled!.amount)).toBe(held);
    }

    // Every charge matches a usage: a completed video its price, a chat its tokens; failures are refunded.
    for (const [id, status] of finals) {
      const [settled] = settlements.get(id)!;
      expect([settled!.type, micros(settled!.charged)]).toEqual(status === 'completed' ? ['capture', VIDEO_MICROS] : ['release', 0]);
    }
    for (const [id, tokens] of load.chats) {
      const [settled] = settlements.get(id)!;
      expect([settled!.type, micros(settled!.charged)]).toEqual(['capture', tokens * MICROS_PER_TOKEN]);
    }
    // A video deleted while it ran is refunded; one that had completed first stays charged.
    for (const id of load.deleted) {
      const [settled] = settlements.get(id)!;
      expect(micros(settled!.charged)).toBe(settled!.type === 'capture' ? VIDEO_MICROS : 0);
    }

    // Every webhook event delivered at least once.
    await vi.waitFor(
      () => {
        const delivered = new Set(
          receiver.received.map((r) => {
            const event = JSON.parse(r.rawBody) as { type: string; data: { id: string } };
            return `${event.type} ${event.data.id}`;
          }),
        );
        for (const [id, status] of finals) expect(delivered).toContain(`video.${status} ${id}`);
      },
      { timeout: 60_000, interval: 250 },
    );
    return { ledger, finals };
  }

  it('keeps the books exact over 1,000 mixed concurrent requests against a small balance', async () => {
    const c = await customer();
    const watch = watchBalance(c.orgId);
    const load = await mixedLoad(c.key, 1_000, 200);
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    // The balance was tight: some requests were refused for funds, and some of each kind went through.
    expect(load.statuses[402]).toBeGreaterThan(0);
    expect(load.videos.size).toBeGreaterThan(0);
    expect(load.chats.size).toBeGreaterThan(0);
    await expectBooksBalance(c, load);
  });

  it(`keeps the books exact when ${processes.join(', ')} ${processes.length > 1 ? 'are each' : 'is'} killed (SIGKILL) mid-load`, async () => {
    const c = await customer();
    const watch = watchBalance(c.orgId);
    const crashes = async () => {
      for (const name of processes) await service.crash!(name);
    };
    const load = await mixedLoad(c.key, processes.length > 1 ? 400 : 1_000, 100, crashes);
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    await expectBooksBalance(c, load);
  });
});
