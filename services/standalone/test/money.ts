import { expect, vi } from 'vitest';
import type { Receiver } from '../../webhook/test/support';
import type { clientFor } from './client';
import type { RunningService } from './harness';

/**
 * The money suite's load and its invariants, for any deployment: one process, separate processes, or several
 * gateways and replicas (requests then go to each gateway in turn).
 */

export const MICROS_PER_TOKEN = 80;
export const VIDEO_MICROS = 400_000; // video-2, 4 seconds at 0.1 USD a second
export const micros = (usd: number) => Math.round(usd * 1_000_000);

export interface LedgerEntry {
  type: 'credit' | 'reservation' | 'capture' | 'release';
  amount: number;
  charged: number;
  available_after: number;
  reference: string | null;
}

type Kind = 'video' | 'chat' | 'cut-stream' | 'delete';
const KINDS: Kind[] = ['video', 'video', 'video', 'video', 'video', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat', 'chat'];
KINDS.push('cut-stream', 'cut-stream', 'cut-stream', 'cut-stream', 'delete', 'delete', 'delete');

/** The load, the balance watch and the books, against one deployment whose webhooks reach `receiver`. */
export function moneyBooks(service: RunningService & { urls?: string[] }, api: ReturnType<typeof clientFor>, receiver: Receiver) {
  const urls = service.urls ?? [service.url];
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

  /**
   * Sends `count` requests of mixed kinds all at once (in waves of `wave`), tracking what each did. With
   * `twiceWithKey`, each video create is sent twice at once under one Idempotency-Key, to two gateways when
   * there are two: a pair answered 200 with two ids is a duplicate video.
   */
  async function mixedLoad(key: string, count: number, wave: number, during?: () => Promise<void>, options: { twiceWithKey?: boolean } = {}) {
    const duplicates: string[][] = [];
    const videos = new Set<string>();
    const deleted = new Set<string>();
    const chats = new Map<string, number>();
    const statuses: Record<string, number> = {};
    const count_ = (status: number | string) => (statuses[status] = (statuses[status] ?? 0) + 1);
    let sent = 0;
    // Each request to the next gateway. One a crash cut off may never be answered (its reply was lost with
    // the process): the client gives up.
    const send = (method: string, path: string, body?: unknown, signal = AbortSignal.timeout(30_000), headers: Record<string, string> = {}) =>
      fetch(`${urls[sent++ % urls.length]}${path}`, {
        method,
        signal,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const one = async (i: number) => {
      const kind = KINDS[i % KINDS.length]!;
      try {
        if (kind === 'video') {
          const body = { model: 'video-2', prompt: `A lighthouse at dusk, take ${i}`, seconds: '4', size: '1280x720' };
          const idempotency = { 'idempotency-key': `take-${i}-${key.slice(-6)}` };
          const answers = await Promise.all(
            Array.from({ length: options.twiceWithKey ? 2 : 1 }, async () => {
              const res = await send('POST', '/v1/videos', body, undefined, options.twiceWithKey ? idempotency : {});
              count_(res.status);
              return res.status === 200 ? ((await res.json()) as { id: string }).id : (await res.arrayBuffer(), undefined);
            }),
          );
          const ids = [...new Set(answers.filter((id) => id !== undefined))];
          if (ids.length > 1) duplicates.push(ids);
          for (const id of ids) videos.add(id);
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
    return { videos, deleted, chats, statuses, duplicates };
  }

  /** Polls the balance during the load (as the operator: the organization's own limits are for its load), so that a moment below zero would be seen. */
  function watchBalance(orgId: string) {
    const seen: { available: number; reserved: number }[] = [];
    let watching = true;
    const done = (async () => {
      while (watching) {
        const res = await fetch(`${urls[seen.length % urls.length]}/admin/v1/organizations/${orgId}/balance`, {
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
    // Read from the list, a page per 100 videos: one GET per video and poll spent the organization's
    // 2,000 requests a minute while jobs taken over after a kill were still finishing.
    const finals = new Map<string, string>();
    await vi.waitFor(
      async () => {
        const listed = new Map<string, string>();
        for (let after: string | undefined; ; ) {
          const page = await api.call('GET', `/v1/videos?limit=100${after ? `&after=${after}` : ''}`, { token: c.key });
          expect(page.status).toBe(200);
          for (const video of page.body.data) listed.set(video.id, video.status);
          if (!page.body.has_more) break;
          after = page.body.data.at(-1).id;
        }
        for (const id of load.videos) {
          if (load.deleted.has(id)) continue;
          expect(listed.get(id)).toMatch(/^(completed|failed)$/);
          finals.set(id, listed.get(id)!);
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
    // The ledger sums to the balance, and no entry ever left it below zero: only a Stripe refund or dispute of a top-up
    // may (a debt, see decisions.md), and this load has none.
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

  return { customer, mixedLoad, watchBalance, ledgerOf, expectBooksBalance };
}
