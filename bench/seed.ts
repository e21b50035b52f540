/**
 * Preloads an event store with a long history (by default about 1,000,000 events: 200,000 chat sessions,
 * 441,000 ledger entries and 20,000 videos across 1,000 organizations), written through the event-store
 * port on the streams the services use, each event checked against its contract, so that the services'
 * projections take it as their own. Each organization's history is appended in the order the services
 * would write it; many organizations are appended concurrently, so their events interleave in the log.
 *
 *   npx tsx bench/seed.ts <DATA_DIR>/events.sqlite [--organizations 1000]
 */
import { createHash, randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { BillingEvents, ChatEvents, randomId, SCOPES, VideoEvents } from '@oc/contracts';
import { type EventStore, type NewEvent, openSqliteStores } from '@oc/eventstore';
import { mapLimit } from './setup';

export interface SeedShape {
  organizations: number;
  sessionsPerOrganization: number;
  videosPerOrganization: number;
}

export const HISTORY: SeedShape = { organizations: 1_000, sessionsPerOrganization: 200, videosPerOrganization: 20 };

/** An organization of the seeded history, with a key that works against it. */
export interface SeededOrganization {
  orgId: string;
  key: string;
}

const CONCURRENT_ORGANIZATIONS = 64;
const CREDIT_MICROS = 100_000_000;
const CHAT_RESERVED_MICROS = 5_000;
const CHAT_USAGE = { prompt_tokens: 12, completion_tokens: 50, total_tokens: 62 };
// 80 micro-USD per token at the default price.
const CHAT_CHARGED_MICROS = CHAT_USAGE.total_tokens * 80;
const VIDEO = { model: 'video-2', seconds: '4', size: '1280x720', cost_micros: 400_000 } as const;
const REPLY = 'A seeded reply that stands in for a model answer of about fifty tokens, long enough to weigh in memory '.repeat(2);

const SCHEMAS: Record<string, { parse(data: unknown): unknown }> = { ...BillingEvents, ...ChatEvents, ...VideoEvents };

/** Checks each event against its contract before it is written: a seed the projections would reject is a bug here. */
function checked(events: NewEvent[]): NewEvent[] {
  for (const event of events) {
    const schema = SCHEMAS[event.type];
    if (!schema) throw new Error(`No contract for event type ${event.type}`);
    schema.parse(event.data);
  }
  return events;
}

/** One stream as its writer sees it: appends with the expected revision of the previous one. */
function writer(store: EventStore, stream: string, count: (n: number) => void) {
  let revision: number | 'no_stream' = 'no_stream';
  return async (...events: NewEvent[]) => {
    const result = await store.appendToStream(stream, checked(events), { expectedRevision: revision });
    revision = result.nextExpectedRevision;
    count(events.length);
  };
}

/** Milliseconds; the history ends now and goes back 30 days, spread evenly over each organization's steps. */
function timeline(steps: number) {
  const end = Date.now();
  const step = (30 * 86_400_000) / steps;
  let at = end - 30 * 86_400_000;
  return () => Math.round((at += step));
}

async function seedOrganization(
  store: EventStore,
  index: number,
  shape: SeedShape,
  count: (n: number) => void,
): Promise<SeededOrganization> {
  const orgId = `org_${randomId()}`;
  const key = `oc_live_${randomBytes(32).toString('base64url')}`;
  const keyId = `key_${randomId()}`;
  const next = timeline(2 + shape.sessionsPerOrganization + shape.videosPerOrganization);
  const seconds = (ms: number) => Math.floor(ms / 1000);
  const account = writer(store, `account-${orgId}`, count);

  const opened = next();
  await account(
    { type: 'OrganizationCreated', data: { org_id: orgId, name: `history-${index}`, tier: 'enterprise', created: seconds(opened) } },
    { type: 'CreditsAdded', data: { org_id: orgId, amount_micros: CREDIT_MICROS, description: 'Seeded credit' } },
  );
  await writer(store, `apikey-${keyId}`, count)({
    type: 'ApiKeyCreated',
    data: {
      key_id: keyId,
      org_id: orgId,
      name: 'seeded',
      mode: 'live',
      prefix: key.slice(0, 12),
      key_hash: createHash('sha256').update(key).digest('hex'),
      scopes: [...SCOPES],
      rate_limit_per_minute: 100_000,
      expires_at: null,
      created: seconds(next()),
    },
  });

  for (let s = 0; s < shape.sessionsPerOrganization; s++) {
    const at = seconds(next());
    const sessionId = `chat_${randomId()}`;
    const completionId = `chatcmpl_${randomId()}`;
    await account({
      type: 'FundsReserved',
      data: {
        org_id: orgId,
        reservation_id: completionId,
        amount_micros: CHAT_RESERVED_MICROS,
        description: 'Chat completion',
        expires_at: at + 600,
        reserved_at: at,
      },
    });
    await writer(store, `chat-${sessionId}`, count)(
      { type: 'ChatSessionStarted', data: { session_id: sessionId, org_id: orgId, created_at: at } },
      {
        type: 'ChatExchangeRecorded',
        data: {
          session_id: sessionId,
          org_id: orgId,
          completion_id: completionId,
          messages: [
            { role: 'user', content: `Seeded question number ${s} about community gardens?`, created_at: at },
            { role: 'assistant', content: REPLY, created_at: at },
          ],
          usage: CHAT_USAGE,
        },
      },
    );
    await account({
      type: 'ReservationCaptured',
      data: {
        org_id: orgId,
        reservation_id: completionId,
        amount_micros: CHAT_CHARGED_MICROS,
        released_micros: CHAT_RESERVED_MICROS - CHAT_CHARGED_MICROS,
      },
    });
  }

  for (let v = 0; v < shape.videosPerOrganization; v++) {
    await seedVideo(store, orgId, next(), account, count);
  }
  return { orgId, key };
}

/** A video's whole life as the video service writes it, ending persisted and settled, so no job resumes it. */
async function seedVideo(
  store: EventStore,
  orgId: string,
  at: number,
  account: (...events: NewEvent[]) => Promise<void>,
  count: (n: number) => void,
) {
  const videoId = `video_${randomId()}`;
  const key = { org_id: orgId, video_id: videoId };
  const url = `http://127.0.0.1:8080/v1/videos/${videoId}/content`;
  const prompt = 'A seeded paper boat drifting down a rainy street';
  const notification = { id: videoId, object: 'video' as const, created: Math.floor(at / 1000), model: VIDEO.model, prompt };
  const video = writer(store, `video-${videoId}`, count);
  await video({
    type: 'VideoRequested',
    data: {
      ...key,
      mode: 'live',
      ...VIDEO,
      prompt,
      remixed_from_video_id: null,
      requested_at: at,
      idempotency_key: null,
      request_hash: null,
    },
  });
  await account({
    type: 'FundsReserved',
    data: {
      org_id: orgId,
      reservation_id: videoId,
      amount_micros: VIDEO.cost_micros,
      description: `Video ${videoId} (${VIDEO.model}, ${VIDEO.seconds}s, ${VIDEO.size})`,
    },
  });
  await video(
    { type: 'VideoQueued', data: key },
    { type: 'GenerationStarted', data: { ...key, provider: 'simulator', upstream_id: `sim_${videoId}`, started_at: at + 10 } },
    {
      type: 'VideoProcessing',
      data: { org_id: orgId, video: { ...notification, status: 'in_progress', progress: 1, url: null } },
    },
    { type: 'VideoStored', data: { ...key, completed_at: at + 20_000, bytes: 120_000 } },
    {
      type: 'VideoCompleted',
      data: {
        org_id: orgId,
        video: {
          ...notification,
          status: 'completed',
          progress: 100,
          url,
          seconds: VIDEO.seconds,
          size: VIDEO.size,
          cost: { amount: VIDEO.cost_micros / 1e6, currency: 'usd' },
        },
      },
    },
  );
  await account({
    type: 'ReservationCaptured',
    data: { org_id: orgId, reservation_id: videoId, amount_micros: VIDEO.cost_micros, released_micros: 0 },
  });
  await video(
    { type: 'VideoCharged', data: { ...key, amount_micros: VIDEO.cost_micros } },
    { type: 'VideoPersisted', data: { ...key, persisted_at: at + 2_700_000, url } },
  );
}

/** Appends the whole history to the SQLite event store in `file`; the first organization is returned for checks. */
export async function seedHistory(file: string, shape: SeedShape = HISTORY) {
  const stores = openSqliteStores(file);
  const started = performance.now();
  let events = 0;
  let reported = 0;
  const count = (n: number) => {
    events += n;
    if (events - reported < 100_000) return;
    reported = events;
    console.log(`  seed: ${events.toLocaleString('en')} events, ${((performance.now() - started) / 1000).toFixed(0)} s`);
  };
  try {
    const organizations = await mapLimit(
      Array.from({ length: shape.organizations }, (_, i) => i),
      CONCURRENT_ORGANIZATIONS,
      (i) => seedOrganization(stores.store, i, shape, count),
    );
    return { events, seconds: (performance.now() - started) / 1000, sample: organizations[0]! };
  } finally {
    await stores.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { organizations: { type: 'string', default: String(HISTORY.organizations) } },
  });
  if (positionals.length !== 1) throw new Error('usage: tsx bench/seed.ts <events.sqlite> [--organizations N]');
  const seeded = await seedHistory(positionals[0]!, { ...HISTORY, organizations: Number(values.organizations) });
  console.log(JSON.stringify(seeded, null, 2));
}
