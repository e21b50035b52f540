import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import {
  ApiError,
  type EventReplay,
  EventStreamQuery,
  type EventStreamReady,
  eventStreamSubject,
  invalidRequest,
  LastEventIdSchema,
  parseOrThrow,
  rateLimited,
  type Reply,
  StreamedEventSchema,
  Subjects,
  unixSeconds,
  VIDEO_WEBHOOK_EVENT_TYPES,
  type WebhookEnvelope,
  WebhookEnvelopeSchema,
  type WebhookEventType,
} from '@oc/contracts';
import type { Subscription } from '@oc/eventstore';
import type { Route, RouteContext } from './routes';

export interface EventStreamOptions {
  /** The gateway's clock, for the key's expiry. */
  now?: () => number;
  /** A comment line this often keeps proxies from closing an idle stream and lets a listener see it is alive. */
  heartbeatMs?: number;
  /** How often the key is asked of billing again, should a revocation broadcast have been missed. */
  reauthenticateMs?: number;
  /** Bytes written but not yet taken by the listener beyond which it is too slow and the stream ends. */
  maxBufferedBytes?: number;
  /** Streams one organization may have open on one gateway. */
  maxStreamsPerOrganization?: number;
  /**
   * Aborted when the gateway's server closes: a stream ends only when its client leaves, so without this a
   * graceful close would wait for every listener forever.
   */
  closing?: AbortSignal;
}

export const EVENT_STREAM_PATH = '/v1/webhooks/events/stream';
const DEFAULT_HEARTBEAT_MS = 15_000;
const DEFAULT_REAUTHENTICATE_MS = 60_000;
const DEFAULT_MAX_BUFFERED_BYTES = 1024 * 1024;
export const DEFAULT_STREAMS_PER_ORGANIZATION = 10;
/** Live events held while the replay is written; more than this and the listener is told to reconnect. */
const MAX_QUEUED_DURING_REPLAY = 1_000;
/** Copies of an event arrive together (one per webhook replica); this many recent ids catch them all. */
const RECENTLY_WRITTEN = 1_024;
/** What EventSource clients wait before reconnecting on their own. */
const RETRY_MS = 3_000;
/** A stream ended for being too slow gets this long to take its last bytes before the socket is cut. */
const CLOSE_GRACE_MS = 10_000;

/**
 * `GET /v1/webhooks/events/stream`: the organization's webhook events, live, as Server-Sent Events whose
 * `data` is exactly the body a webhook delivery carries. What `oc webhooks listen` reads, and forwards.
 */
export function eventStreamRoute(options: EventStreamOptions = {}): Route {
  const open = new OpenStreams(options.maxStreamsPerOrganization ?? DEFAULT_STREAMS_PER_ORGANIZATION);
  return {
    method: 'GET',
    path: EVENT_STREAM_PATH,
    scope: 'webhook:read',
    doc: {
      summary:
        "The organization's webhook events as Server-Sent Events (`id` the event id, `event` its type, `data` the delivery body); resumes after Last-Event-ID",
      query: EventStreamQuery,
      media: ['text/event-stream'],
      events: WebhookEnvelopeSchema,
    },
    handle: async (ctx) => {
      const { events } = parseOrThrow(EventStreamQuery, ctx.query, { events: 'invalid_events' });
      const after = lastEventId(ctx);
      const orgId = ctx.principal.org_id;
      if (!open.enter(orgId)) throw rateLimited(1, `${open.max} event streams per organization on this gateway`);
      try {
        // Without `events`, the video events it carried before billing's existed: those are asked for by name.
        return await stream(ctx, options, events ?? [...VIDEO_WEBHOOK_EVENT_TYPES], after);
      } finally {
        open.leave(orgId);
      }
    },
  };
}

function lastEventId(ctx: RouteContext): string | undefined {
  const raw = ctx.req.headers['last-event-id'];
  if (raw === undefined) return undefined;
  const parsed = LastEventIdSchema.safeParse(raw);
  if (!parsed.success) {
    throw invalidRequest('invalid_last_event_id', 'Last-Event-ID must be the id of an event this stream sent (evt_…).', 'Last-Event-ID');
  }
  return parsed.data;
}

async function stream(
  ctx: RouteContext,
  options: EventStreamOptions,
  types: WebhookEventType[],
  after: string | undefined,
): Promise<Reply<unknown> | void> {
  const { services, principal, res } = ctx;
  const orgId = principal.org_id;
  const listener = new Listener(res, options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES);
  const keyHash = createHash('sha256')
    .update(/^Bearer +(\S+)$/i.exec(ctx.req.headers.authorization ?? '')?.[1] ?? '')
    .digest('hex');
  const wanted = (envelope: WebhookEnvelope) => types.includes(envelope.type);
  const subscriptions: Subscription[] = [];
  const timers: NodeJS.Timeout[] = [];
  const cleanups: (() => void)[] = [];
  try {
    // Subscribed before the webhook service is asked anything: an event it broadcasts after answering reaches us.
    subscriptions.push(
      await services.onBroadcast(eventStreamSubject(orgId), (payload) => {
        const parsed = StreamedEventSchema.safeParse(payload);
        if (parsed.success && parsed.data.org_id === orgId && wanted(parsed.data.event)) listener.live(parsed.data.event);
      }),
      await services.onBroadcast(Subjects.broadcast.apiKeyRevoked, (payload) => {
        if ((payload as { key_hash?: unknown } | null)?.key_hash === keyHash) listener.fail(revoked());
      }),
    );
    // The first page of the replay is also the check that the webhook service is there: if not, a 503 before any event.
    const request = (from: string | undefined) =>
      services.request<EventReplay>(Subjects.webhook.replayEvents, { org_id: orgId, after: from, types }, { headers: ctx.headers });
    let page = await request(after);
    if (!page.ok) return page;
    // Refused while the first page was asked for (the key revoked meanwhile): answered like any other request.
    if (listener.refusal) throw listener.refusal;

    listener.start();
    const ready: EventStreamReady = { object: 'webhook_event_stream', organization_id: orgId, events: types, resumed_after: after ?? null };
    listener.control('ready', ready);
    if (!page.data.found) {
      listener.control('gap', {
        last_event_id: after!,
        message: `Event ${after} is no longer held for replay (or is not this organization's): events sent while you were away may be missing from this stream; GET /v1/videos shows every video's state.`,
      });
    }
    for (;;) {
      for (const envelope of page.data.events) listener.replayed(envelope);
      if (!page.data.has_more || listener.ended) break;
      const next = await request(page.data.events.at(-1)!.id);
      if (!next.ok) {
        listener.fail(new ApiError(next.error));
        break;
      }
      page = next;
    }
    listener.goLive();
    const shutDown = () => listener.fail(restarting());
    if (options.closing?.aborted) shutDown();
    options.closing?.addEventListener('abort', shutDown, { once: true });
    cleanups.push(() => options.closing?.removeEventListener('abort', shutDown));

    const now = options.now ?? Date.now;
    timers.push(
      setInterval(() => {
        if (principal.expires_at !== null && principal.expires_at <= unixSeconds(now())) listener.fail(expired());
        else listener.comment('keep-alive');
      }, options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS),
      setInterval(() => {
        void services.request<unknown>(Subjects.billing.authenticate, { key_hash: keyHash }).then((reply) => {
          if (reply.ok && reply.data === null) listener.fail(revoked());
        });
      }, options.reauthenticateMs ?? DEFAULT_REAUTHENTICATE_MS),
    );
    await listener.closed;
  } finally {
    for (const cleanup of cleanups) cleanup();
    for (const timer of timers) clearInterval(timer);
    await Promise.all(subscriptions.map((s) => s.stop()));
    listener.close();
  }
}

const restarting = () =>
  new ApiError({
    status: 503,
    type: 'service_unavailable_error',
    code: 'service_unavailable',
    message: 'The gateway is shutting down; reconnect with Last-Event-ID.',
  });
const revoked = () => new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_api_key', message: 'This API key was revoked.' });
const expired = () => new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_api_key', message: 'This API key has expired.' });

/**
 * One listener's response. Until the replay is written, live events wait in a bounded queue; afterwards they
 * are written at once. A listener that does not take what is written (more than `maxBufferedBytes` waiting in
 * the response and its socket) is told so in a last `error` event and the stream ends: it reconnects with
 * `Last-Event-ID` and is replayed what it missed, while the gateway's memory stays bounded.
 */
class Listener {
  ended = false;
  refusal: ApiError | undefined;
  readonly closed: Promise<void>;
  private started = false;
  private queue: WebhookEnvelope[] | undefined = [];
  /** Ids written by the replay, so that a live event that is also in the replay is written once. */
  private readonly replayedIds = new Set<string>();
  /** The ids written last, oldest first: a copy of one of them (from another webhook replica) is dropped. */
  private readonly written = new Set<string>();
  private grace: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly maxBufferedBytes: number,
  ) {
    this.closed = new Promise<void>((resolve) => res.once('close', resolve));
    res.once('close', () => {
      this.ended = true;
    });
  }

  start(): void {
    const { res } = this;
    res.statusCode = 200;
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    this.started = true;
    this.write(`retry: ${RETRY_MS}\n\n`);
  }

  control(event: 'ready' | 'gap', data: unknown): void {
    this.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  comment(text: string): void {
    this.write(`: ${text}\n\n`);
  }

  replayed(envelope: WebhookEnvelope): void {
    this.replayedIds.add(envelope.id);
    this.event(envelope);
  }

  live(envelope: WebhookEnvelope): void {
    if (!this.queue) return this.event(envelope);
    if (this.queue.length >= MAX_QUEUED_DURING_REPLAY) return this.fail(tooSlow());
    this.queue.push(envelope);
  }

  goLive(): void {
    const queued = this.queue ?? [];
    this.queue = undefined;
    for (const envelope of queued) if (!this.replayedIds.has(envelope.id)) this.event(envelope);
    this.replayedIds.clear();
  }

  /**
   * The last event of the stream: an error in the API's shape. Before the stream began, it is kept as
   * `refusal`, for the route to answer as an ordinary error response.
   */
  fail(error: ApiError): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.started) {
      this.refusal = error;
      return;
    }
    this.res.write(`event: error\ndata: ${JSON.stringify(error.toBody())}\n\n`);
    this.res.end();
    this.grace = setTimeout(() => this.res.destroy(), CLOSE_GRACE_MS);
    this.grace.unref();
  }

  /** Ends a stream that began; before it began, the route's answer (an error) is still to be sent. */
  close(): void {
    clearTimeout(this.grace);
    if (this.started && !this.res.writableEnded) this.res.end();
  }

  private event(envelope: WebhookEnvelope): void {
    // Every webhook replica broadcasts every event (each from its own ordered feed): write each once.
    if (this.written.has(envelope.id)) return;
    this.written.add(envelope.id);
    if (this.written.size > RECENTLY_WRITTEN) this.written.delete(this.written.values().next().value!);
    this.write(`id: ${envelope.id}\nevent: ${envelope.type}\ndata: ${JSON.stringify(envelope)}\n\n`);
  }

  private write(text: string): void {
    if (this.ended || !this.started) return;
    this.res.write(text);
    if (this.res.writableLength > this.maxBufferedBytes) this.fail(tooSlow());
  }
}

const tooSlow = () =>
  new ApiError({
    status: 503,
    type: 'api_error',
    code: 'listener_too_slow',
    message: 'The listener did not keep up with its events, so the stream ended; reconnect with Last-Event-ID to be sent what it missed.',
  });

/** Each organization's streams open on this gateway. */
class OpenStreams {
  private readonly counts = new Map<string, number>();
  constructor(readonly max: number) {}

  enter(orgId: string): boolean {
    const open = this.counts.get(orgId) ?? 0;
    if (open >= this.max) return false;
    this.counts.set(orgId, open + 1);
    return true;
  }

  leave(orgId: string): void {
    const open = this.counts.get(orgId)! - 1;
    if (open === 0) this.counts.delete(orgId);
    else this.counts.set(orgId, open);
  }
}
