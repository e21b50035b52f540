import 'reflect-metadata';
import { createBilling } from '@oc/billing';
import { ChatConfigSchema, chatSettings, createChat } from '@oc/chat';
import { ChatMessages, ManualClock, ResponseMessages, sortableIds, Subjects, unwrap } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Billing and chat in one process on one event store, as the standalone wires them: billing may answer a
 * capture once it is decided, before it is stored. Whatever the caller is then told must still wait for the
 * capture's commit, or a crash in between leaves the answered completion unpaid (issue 28, finding 4).
 */
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
const logger = createLogger({ service: 'answered-once-charged', level: 'silent' });
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const client = new InProcessServiceClient(broker);
let chat: Awaited<ReturnType<typeof createChat>>;
let closeAll: () => Promise<void>;

beforeAll(async () => {
  const billing = await createBilling({
    eventStore: stores.store,
    readModels: new SqliteReadModelStore({ filename: ':memory:' }),
    client,
    clock,
    ids: sortableIds,
    logger,
    callersInProcess: true,
  });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  chat = await createChat({
    eventStore: stores.store,
    readModels: new SqliteReadModelStore({ filename: ':memory:' }),
    client,
    clock,
    ids: sortableIds,
    logger,
    ...chatSettings(ChatConfigSchema.parse({ CHAT_SIMULATOR_WORD_DELAY_MS: '0' })),
  });
  closeAll = async () => {
    await chat.close();
    await billingApp.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => closeAll());

/**
 * Holds the event store's next group commit that stores a capture, until `commit()`. Held at the writer, so the
 * store's queue keeps its order: what is appended behind the capture waits for it, as after a real slow fsync.
 */
function holdCaptureCommit() {
  const writer = (stores.store as unknown as { writer: { commit(batch: Array<{ rows: Array<{ type: string }> }>, created: number): Promise<unknown> } }).writer;
  const commit = writer.commit.bind(writer);
  let held!: () => void;
  const reached = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  /** The types of the events appended before the capture's commit is let through. */
  const appendedBefore: string[] = [];
  writer.commit = async (batch, created) => {
    if (batch.some((append) => append.rows.some((row) => row.type === 'ReservationCaptured'))) {
      writer.commit = commit;
      held();
      await released;
    }
    return commit(batch, created);
  };
  const append = stores.store.appendToStream.bind(stores.store);
  stores.store.appendToStream = (streamName, events, options) => {
    appendedBefore.push(...events.map((event) => event.type));
    return append(streamName, events, options);
  };
  return {
    reached,
    appendedBefore,
    commit: () => {
      stores.store.appendToStream = append;
      release();
    },
  };
}

/** Lets every turn of the event loop that does not wait on the held commit run. */
async function settle() {
  for (let turn = 0; turn < 20; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
}

async function orgWithCredit() {
  const org = unwrap(await client.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' }));
  unwrap(await client.request(Subjects.billing.addCredits, { org_id: org.id, amount_micros: 1_000_000, description: 'credit' }));
  return org.id;
}

describe('a paid completion is answered only once its charge is stored', () => {
  it.each([
    [
      'a chat completion (its session exchange is stored behind the capture)',
      (org_id: string) => chat.service.createChatCompletion(ChatMessages.createChatCompletion.parse({ model: 'chat-2', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, org_id, mode: 'live' })),
      true,
    ],
    [
      'a text completion (no session)',
      (org_id: string) => chat.service.createCompletion(ChatMessages.createCompletion.parse({ model: 'chat-2', prompt: 'Hello', max_tokens: 8, org_id, mode: 'live' })),
      false,
    ],
    [
      'a response with store: false (nothing kept)',
      (org_id: string) => chat.responses.create(ResponseMessages.create.parse({ model: 'chat-2', input: 'Hello', max_output_tokens: 16, store: false, org_id, mode: 'live' })),
      false,
    ],
  ])('%s', async (_, ask, keepsExchange) => {
    const org_id = await orgWithCredit();
    const capture = holdCaptureCommit();
    const events: string[] = [];

    const answer = ask(org_id).then((body) => (events.push('answered'), body));
    await capture.reached;
    await settle();
    events.push('capture let through');
    capture.commit();
    await answer;

    expect(events).toEqual(['capture let through', 'answered']);
    // Chat's exchange does not wait for the capture's commit: it is queued behind the capture, into that commit or the next.
    expect(capture.appendedBefore.includes('ChatExchangeRecorded')).toBe(keepsExchange);
    const balance = unwrap(await client.request<{ available: number; reserved: number }>(Subjects.billing.getBalance, { org_id }));
    expect(balance.reserved).toBe(0);
    expect(balance.available).toBeLessThan(1);
  });
});
