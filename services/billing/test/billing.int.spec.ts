import 'reflect-metadata';
import { ManualClock, sortableIds, Subjects, type Reply } from '@oc/contracts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStores, SqliteSnapshotStore } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient, type ServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createBilling } from '../src/app';
import { accountStream } from '../src/domain/account';

/** The billing service alone, answering on the in-process transport, as other services reach it. */
async function startBilling(files: { dir: string } | undefined = undefined, options: { callersInProcess?: boolean } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 10, 22));
  // Events are stamped by the test's clock, as in the running service, so that days follow it.
  const stores = openSqliteStores({ filename: files ? join(files.dir, 'events.sqlite') : ':memory:', clock });
  const snapshots =
    files &&
    new SqliteSnapshotStore(join(files.dir, 'snapshots.sqlite'), (error) => {
      throw error;
    });
  const broker = new InProcessBroker();
  const client = new InProcessServiceClient(broker);
  const billing = await createBilling({
    eventStore: stores.store,
    ...(snapshots && { snapshots }),
    readModels: new SqliteReadModelStore({ filename: files ? join(files.dir, 'read-models.sqlite') : ':memory:' }),
    client,
    clock,
    ids: sortableIds,
    logger: createLogger({ service: 'billing-test', level: 'silent' }),
    ...options,
  });
  const app = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await app.listen();
  return {
    client,
    clock,
    store: stores.store,
    async close() {
      await app.close();
      await billing.close();
      await stores.close();
      snapshots?.close();
    },
  };
}

/** A new organization with `micros` of credit. */
async function orgWithCredit(bus: ServiceClient, micros: number) {
  const org = await bus.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' });
  if (!org.ok) throw new Error('org');
  await bus.request(Subjects.billing.addCredits, { org_id: org.data.id, amount_micros: micros, description: 'Top-up' });
  return org.data.id;
}

describe('billing: a reservation answered once decided', () => {
  type Billing = Awaited<ReturnType<typeof startBilling>>;
  /** Holds every append to the event store until `open()`. */
  function holdAppends(store: Billing['store']) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const append = store.appendToStream.bind(store);
    const spy = vi.spyOn(store, 'appendToStream').mockImplementation(async (...args) => (await opened, append(...args)));
    return { open: () => (open(), spy.mockRestore()) };
  }
  const settledWithin = (promise: Promise<unknown>, ms: number) =>
    Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

  /** 0.40 USD reserved for chat, asking to be answered once decided. */
  const reserveAhead = (client: ServiceClient, org_id: string) =>
    client.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'r1', amount_micros: 400_000, description: 'chat', answer_when_decided: true });
  /** 0.25 USD of it captured, asking the same. */
  const captureAhead = (client: ServiceClient, org_id: string) =>
    client.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'r1', amount_micros: 250_000, answer_when_decided: true });
  /**
   * `command` is answered (ok) while its append is held; a balance asked for after it waits until the append is
   * let through, then shows `balance`.
   */
  async function answeredBeforeStored(billing: Billing, org_id: string, command: () => Promise<Reply<unknown>>, balance: object) {
    const appends = holdAppends(billing.store);
    const answered = command();
    expect(await settledWithin(answered, 1_000)).toBe(true);
    expect((await answered).ok).toBe(true);
    const read = billing.client.request(Subjects.billing.getBalance, { org_id });
    expect(await settledWithin(read, 50)).toBe(false);
    appends.open();
    expect(await read).toMatchObject({ ok: true, data: balance });
  }

  it('answers before it is stored where its callers share its process; a balance read after shows it held', async () => {
    const billing = await startBilling(undefined, { callersInProcess: true });
    try {
      const org_id = await orgWithCredit(billing.client, 1_000_000);

      await answeredBeforeStored(billing, org_id, () => reserveAhead(billing.client, org_id), { available: 0.6, reserved: 0.4 });
      expect((await billing.store.readStream(accountStream(org_id))).map((e) => e.type)).toContain('FundsReserved');
    } finally {
      await billing.close();
    }
  });

  it('answers a capture that asks once decided too; a balance read after shows it charged', async () => {
    const billing = await startBilling(undefined, { callersInProcess: true });
    try {
      const org_id = await orgWithCredit(billing.client, 1_000_000);
      expect((await reserveAhead(billing.client, org_id)).ok).toBe(true);

      await answeredBeforeStored(billing, org_id, () => captureAhead(billing.client, org_id), { available: 0.75, reserved: 0 });
    } finally {
      await billing.close();
    }
  });

  it('still refuses what the balance cannot cover, exactly, among 200 at once', async () => {
    const billing = await startBilling(undefined, { callersInProcess: true });
    try {
      const org_id = await orgWithCredit(billing.client, 1_000_000);
      const replies = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          billing.client.request(Subjects.billing.reserveFunds, {
            org_id,
            reservation_id: `res_${i}`,
            amount_micros: 30_000,
            description: 'chat',
            answer_when_decided: true,
          }),
        ),
      );
      expect(replies.filter((r) => r.ok)).toHaveLength(33);
      expect(await billing.client.request(Subjects.billing.getBalance, { org_id })).toMatchObject({ data: { available: 0.01, reserved: 0.99 } });
    } finally {
      await billing.close();
    }
  });

  it('answers a reservation once decided when its callers run in other processes, a capture only once stored', async () => {
    const billing = await startBilling();
    try {
      const org_id = await orgWithCredit(billing.client, 1_000_000);

      await answeredBeforeStored(billing, org_id, () => reserveAhead(billing.client, org_id), { available: 0.6, reserved: 0.4 });

      const held = holdAppends(billing.store);
      const captured = captureAhead(billing.client, org_id);
      expect(await settledWithin(captured, 200)).toBe(false);
      held.open();
      expect((await captured).ok).toBe(true);
    } finally {
      await billing.close();
    }
  });
});

describe('billing: reservations against the prepaid balance', () => {
  let billing: Awaited<ReturnType<typeof startBilling>>;
  let bus: ServiceClient;
  beforeAll(async () => {
    billing = await startBilling();
    bus = billing.client;
  });
  afterAll(() => billing.close());

  const balance = async (org_id: string) => {
    const reply = await bus.request<{ available: number; reserved: number }>(Subjects.billing.getBalance, { org_id });
    if (!reply.ok) throw new Error('balance');
    return reply.data;
  };

  it('lets exactly the affordable number of 200 concurrent reservations through, and refuses the rest with 402', async () => {
    const org_id = await orgWithCredit(bus, 1_000_000);
    const replies: Reply<unknown>[] = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        bus.request(Subjects.billing.reserveFunds, {
          org_id,
          reservation_id: `res_${i}`,
          amount_micros: 30_000,
          description: 'video',
        }),
      ),
    );
    const accepted = replies.filter((r) => r.ok);
    const refused = replies.filter((r) => !r.ok);
    expect(accepted).toHaveLength(33);
    expect(refused).toHaveLength(167);
    for (const r of refused) {
      if (r.ok) continue;
      expect(r.error).toMatchObject({ status: 402, type: 'insufficient_quota', code: 'insufficient_quota' });
      expect(r.error.message).toMatch(/requires \$0\.03 but \$0\.01 is available/);
    }
    expect(await balance(org_id)).toMatchObject({ available: 0.01, reserved: 0.99 });
  });

  it('captures usage, returns the unused part, and refunds released reservations', async () => {
    const org_id = await orgWithCredit(bus, 1_000_000);
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'a', amount_micros: 400_000, description: 'chat' });
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'b', amount_micros: 500_000, description: 'video' });
    expect(await balance(org_id)).toMatchObject({ available: 0.1, reserved: 0.9 });
    expect((await bus.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'a', amount_micros: 123_456 })).ok).toBe(true);
    expect((await bus.request(Subjects.billing.releaseReservation, { org_id, reservation_id: 'b' })).ok).toBe(true);
    expect(await balance(org_id)).toMatchObject({ available: 0.876544, reserved: 0 });

    // Repeats (a redelivered message, a retried call) charge and refund nothing more.
    await bus.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'a', amount_micros: 123_456 });
    await bus.request(Subjects.billing.releaseReservation, { org_id, reservation_id: 'b' });
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'a', amount_micros: 400_000, description: 'chat' });
    expect(await balance(org_id)).toMatchObject({ available: 0.876544, reserved: 0 });

    const ledger = await bus.request<{ data: { type: string; amount: number; charged: number }[] }>(Subjects.billing.listLedger, {
      org_id,
      limit: 10,
    });
    expect(ledger.ok && ledger.data.data.map((e) => [e.type, e.amount, e.charged])).toEqual([
      ['release', 0.5, 0],
      ['capture', 0.276544, 0.123456],
      ['reservation', -0.5, 0],
      ['reservation', -0.4, 0],
      ['credit', 1, 0],
    ]);
  });

  it('releases a reservation left open past its expiry by itself, once, with a ledger entry saying why', async () => {
    const org_id = await orgWithCredit(bus, 1_000_000);
    const now = Math.floor(billing.clock.now() / 1000);
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'late', amount_micros: 300_000, description: 'chat', expires_at: now + 60 });
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'live', amount_micros: 200_000, description: 'video', expires_at: now + 600 });
    expect(await balance(org_id)).toMatchObject({ available: 0.5, reserved: 0.5 });

    billing.clock.advance(61_000);
    await vi.waitFor(async () => expect(await balance(org_id)).toMatchObject({ available: 0.8, reserved: 0.2 }), { timeout: 5_000 });

    const capture = await bus.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'late', amount_micros: 1 });
    expect(capture).toMatchObject({ ok: false, error: { status: 409, code: 'reservation_expired' } });
    const ledger = await bus.request<{ data: { type: string; amount: number; description: string; reference: string }[] }>(
      Subjects.billing.listLedger,
      { org_id, limit: 1 },
    );
    expect(ledger.ok && ledger.data.data).toEqual([
      expect.objectContaining({ type: 'release', amount: 0.3, reference: 'late', description: expect.stringMatching(/^Reservation expired/) }),
    ]);
    // The one not yet due is still held, and is captured as usual.
    expect((await bus.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'live', amount_micros: 200_000 })).ok).toBe(true);
    expect(await balance(org_id)).toMatchObject({ available: 0.8, reserved: 0 });
  });

  it('names the holders of open reservations by prefix and releases what one holder left open, in batches', async () => {
    const org_id = await orgWithCredit(bus, 10_000_000);
    const other = await orgWithCredit(bus, 1_000_000);
    const reserve = (org: string, reservation_id: string, holder?: string) =>
      bus.request(Subjects.billing.reserveFunds, { org_id: org, reservation_id, amount_micros: 1_000, description: 'chat', ...(holder ? { holder } : {}) });
    for (let i = 0; i < 502; i++) await reserve(org_id, `gone-${i}`, 'chat/a/run_1');
    await reserve(other, 'gone-x', 'chat/a/run_1');
    await reserve(org_id, 'alive', 'chat/a/run_2');
    await reserve(org_id, 'video', undefined);
    await reserve(org_id, 'other-product', 'chatter/b/run_3');
    expect((await bus.request<{ holders: string[] }>(Subjects.billing.listReservationHolders, { prefix: 'chat/' }))).toEqual({
      ok: true,
      data: { holders: ['chat/a/run_1', 'chat/a/run_2'] },
    });

    const first = await bus.request(Subjects.billing.releaseHeldReservations, { holder: 'chat/a/run_1' });
    expect(first).toEqual({ ok: true, data: { released: 500, more: true } });
    expect(await bus.request(Subjects.billing.releaseHeldReservations, { holder: 'chat/a/run_1' })).toEqual({ ok: true, data: { released: 3, more: false } });
    expect(await balance(other)).toMatchObject({ available: 1, reserved: 0 });
    // What other processes hold stays held.
    expect(await balance(org_id)).toMatchObject({ available: 9.997, reserved: 0.003 });
    expect((await bus.request<{ holders: string[] }>(Subjects.billing.listReservationHolders, { prefix: 'chat/' }))).toEqual({
      ok: true,
      data: { holders: ['chat/a/run_2'] },
    });
  });

  it('refuses to capture more than was reserved, so usage can never overdraw', async () => {
    const org_id = await orgWithCredit(bus, 100);
    await bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id: 'r', amount_micros: 100, description: 'chat' });
    const reply = await bus.request(Subjects.billing.captureReservation, { org_id, reservation_id: 'r', amount_micros: 101 });
    expect(reply).toMatchObject({ ok: false, error: { status: 400, code: 'capture_exceeds_reservation' } });
  });

  it('answers malformed messages with a 400 naming the field', async () => {
    const reply = await bus.request(Subjects.billing.reserveFunds, { org_id: 'org_x', reservation_id: 'r', amount_micros: -5 });
    expect(reply).toMatchObject({ ok: false, error: { status: 400, param: 'amount_micros' } });
  });
});

describe('billing: console members, sessions and daily figures', () => {
  let billing: Awaited<ReturnType<typeof startBilling>>;
  let bus: ServiceClient;
  beforeAll(async () => {
    billing = await startBilling();
    bus = billing.client;
  });
  afterAll(() => billing.close());

  const ok = async <T = any>(subject: string, message: unknown): Promise<T> => {
    const reply = await bus.request<T>(subject, message);
    if (!reply.ok) throw new Error(`${subject}: ${JSON.stringify(reply.error)}`);
    return reply.data;
  };
  const newOrg = async (name: string) => (await ok<{ id: string }>(Subjects.billing.createOrganization, { name, tier: 'standard' })).id;
  const hash = (c: string) => c.repeat(64);

  it('keeps an email to one member, ends its sessions when it is removed, and frees the address', async () => {
    const acme = await newOrg('Acme');
    const globex = await newOrg('Globex');
    const member = await ok(Subjects.billing.createMember, { org_id: acme, email: ' Ada@Example.com ', name: 'Ada', password_hash: '$scrypt$1' });
    expect(member).toEqual({ id: expect.stringMatching(/^mem_/), object: 'member', organization_id: acme, email: 'ada@example.com', name: 'Ada', created: expect.any(Number) });
    const again = await bus.request(Subjects.billing.createMember, { org_id: globex, email: 'ada@example.com', name: null, password_hash: '$scrypt$2' });
    expect(again).toMatchObject({ ok: false, error: { status: 409, code: 'member_exists' } });
    expect(await ok(Subjects.billing.memberCredentials, { email: 'ADA@example.com' })).toEqual({ member_id: member.id, org_id: acme, password_hash: '$scrypt$1' });
    expect(await ok(Subjects.billing.memberCredentials, { email: 'nobody@example.com' })).toBeNull();

    const expires_at = Math.floor(billing.clock.now() / 1000) + 3600;
    const session = await ok(Subjects.billing.startConsoleSession, { token_hash: hash('a'), subject: { kind: 'member', member_id: member.id }, expires_at });
    expect(session).toMatchObject({ kind: 'member', member: { id: member.id }, organization: { id: acme, name: 'Acme', tier: 'standard' }, expires_at });
    expect(await ok(Subjects.billing.authenticateConsoleSession, { token_hash: hash('a') })).toEqual(session);

    // Another organization cannot remove Acme's member; Acme can, and the session ends with it.
    expect(await bus.request(Subjects.billing.removeMember, { org_id: globex, member_id: member.id })).toMatchObject({ ok: false, error: { status: 404 } });
    await ok(Subjects.billing.removeMember, { org_id: acme, member_id: member.id });
    expect(await ok(Subjects.billing.authenticateConsoleSession, { token_hash: hash('a') })).toBeNull();
    expect((await ok<{ data: unknown[] }>(Subjects.billing.listMembers, { org_id: acme })).data).toEqual([]);
    const reused = await ok(Subjects.billing.createMember, { org_id: globex, email: 'ada@example.com', name: null, password_hash: '$scrypt$3' });
    expect((await ok<{ data: unknown[] }>(Subjects.billing.listMembers, { org_id: globex })).data).toEqual([reused]);
  });

  it('ends a session on sign-out, and signing out twice is harmless', async () => {
    const expires_at = Math.floor(billing.clock.now() / 1000) + 3600;
    const operator = await ok(Subjects.billing.startConsoleSession, { token_hash: hash('b'), subject: { kind: 'operator', credential: hash('c') }, expires_at });
    expect(operator).toEqual({ kind: 'operator', session_id: expect.stringMatching(/^cs_/), credential: hash('c'), expires_at });
    await ok(Subjects.billing.endConsoleSession, { token_hash: hash('b') });
    await ok(Subjects.billing.endConsoleSession, { token_hash: hash('b') });
    expect(await ok(Subjects.billing.authenticateConsoleSession, { token_hash: hash('b') })).toBeNull();
  });

  it('adds up what captures charged per UTC day and what each key reported per day', async () => {
    const org_id = await newOrg('Daily');
    await ok(Subjects.billing.addCredits, { org_id, amount_micros: 5_000_000, description: 'Top-up' });
    const charge = async (id: string, micros: number) => {
      await ok(Subjects.billing.reserveFunds, { org_id, reservation_id: id, amount_micros: 1_000_000, description: 'video' });
      await ok(Subjects.billing.captureReservation, { org_id, reservation_id: id, amount_micros: micros });
    };
    await charge('yesterday-1', 400_000);
    const key = await ok<{ id: string }>(Subjects.billing.createApiKey, { org_id, name: 'k', scopes: ['video:read'] });
    await ok(Subjects.billing.recordKeyUsage, { usage: [{ key_id: key.id, requests: 3, last_used_at: Math.floor(billing.clock.now() / 1000) }] });
    billing.clock.advance(86_400_000);
    await charge('today-1', 100_000);
    await charge('today-2', 50_000);
    await ok(Subjects.billing.recordKeyUsage, { usage: [{ key_id: key.id, requests: 2, last_used_at: Math.floor(billing.clock.now() / 1000) }] });

    const spend = await ok<{ days: { date: string; amount: number }[]; total: number }>(Subjects.billing.dailySpend, { org_id, days: 3 });
    const day = (offset: number) => new Date(billing.clock.now() - offset * 86_400_000).toISOString().slice(0, 10);
    expect(spend).toMatchObject({
      object: 'daily_spend',
      days: [
        { date: day(2), amount: 0 },
        { date: day(1), amount: 0.4 },
        { date: day(0), amount: 0.15 },
      ],
      total: 0.55,
    });
    expect(await ok(Subjects.billing.keyDailyUsage, { org_id, days: 30 })).toEqual({
      object: 'list',
      data: [
        { key_id: key.id, date: day(1), requests: 3 },
        { key_id: key.id, date: day(0), requests: 2 },
      ],
      has_more: false,
    });
  });
});

describe('billing: an account with a long history', () => {
  it('loads from its snapshot after a restart, reading only the events after it, with the balance exact', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oc-billing-snapshots-'));
    try {
      const first = await startBilling({ dir });
      const org = await first.client.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Busy', tier: 'enterprise' });
      if (!org.ok) throw new Error('org');
      const org_id = org.data.id;
      await first.client.request(Subjects.billing.addCredits, { org_id, amount_micros: 100_000_000, description: 'Top-up' });
      // Ten thousand events of history, written as billing writes them: a reservation, then its capture.
      let revision = 1;
      for (let batch = 0; batch < 10; batch++) {
        const events = Array.from({ length: 500 }, (_, i) => {
          const reservation_id = `chatcmpl_${batch}_${i}`;
          return [
            { id: crypto.randomUUID(), type: 'FundsReserved', data: { org_id, reservation_id, amount_micros: 2_000, description: 'Chat completion', expires_at: 2_000_000_000, reserved_at: 1_795_000_000 } },
            { id: crypto.randomUUID(), type: 'ReservationCaptured', data: { org_id, reservation_id, amount_micros: 1_000, released_micros: 1_000 } },
          ];
        }).flat();
        revision = (await first.store.appendToStream(accountStream(org_id), events, { expectedRevision: revision })).nextExpectedRevision;
      }
      const reserve = (bus: ServiceClient, reservation_id: string, amount_micros: number) =>
        bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id, amount_micros, description: 'video' });
      // Decided on the whole stream (the kept state was behind it), which leaves a snapshot.
      expect((await reserve(first.client, 'after_1', 1_000)).ok).toBe(true);
      await first.close();

      const second = await startBilling({ dir });
      const reads = vi.spyOn(second.store, 'readStream');
      // 100 USD credited, 5,000 captures of 1,000 micro-USD, 1,000 still held: 94,999,000 available.
      const refused = await reserve(second.client, 'after_2', 94_999_001);
      expect(refused).toMatchObject({ ok: false, error: { status: 402 } });
      expect((await reserve(second.client, 'after_3', 94_999_000)).ok).toBe(true);
      const accountReads = reads.mock.calls.filter(([stream]) => stream === accountStream(org_id));
      expect(accountReads.length).toBeGreaterThan(0);
      for (const [, options] of accountReads) expect(options?.fromRevision).toBeGreaterThanOrEqual(10_000);
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ignores a snapshot of the earlier version (settlements as a map): folds the account from its first event, exactly', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oc-billing-snapshots-'));
    try {
      const first = await startBilling({ dir });
      const org_id = await orgWithCredit(first.client, 1_000_000);
      const ask = (bus: ServiceClient, subject: string, body: object) => bus.request(subject, { org_id, ...body });
      expect((await ask(first.client, Subjects.billing.reserveFunds, { reservation_id: 'chatcmpl_1', amount_micros: 300_000, description: 'chat' })).ok).toBe(true);
      expect((await ask(first.client, Subjects.billing.captureReservation, { reservation_id: 'chatcmpl_1', amount_micros: 100_000 })).ok).toBe(true);
      const [last] = (await first.store.readStream(accountStream(org_id))).slice(-1);
      await first.close();
      // As version 1 kept it, with figures that would show if it were used: no balance, nothing settled.
      const older = new SqliteSnapshotStore(join(dir, 'snapshots.sqlite'), (error) => {
        throw error;
      });
      older.save(accountStream(org_id), {
        revision: last!.revision,
        eventId: last!.id,
        version: 1,
        state: { status: 'open', orgId: org_id, tier: 'standard', customLimits: {}, balanceMicros: 0, reservations: [], settled: [] },
      });
      older.close();

      const second = await startBilling({ dir });
      // The repeat is recognised, and 0.90 USD is available to the micro-dollar.
      expect((await ask(second.client, Subjects.billing.captureReservation, { reservation_id: 'chatcmpl_1', amount_micros: 100_000 })).ok).toBe(true);
      const reserve = (reservation_id: string, amount_micros: number) =>
        ask(second.client, Subjects.billing.reserveFunds, { reservation_id, amount_micros, description: 'chat' });
      expect(await reserve('chatcmpl_2', 900_001)).toMatchObject({ ok: false, error: { status: 402 } });
      expect((await reserve('chatcmpl_3', 900_000)).ok).toBe(true);
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
