import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, type VideoEventData, type VideoNotificationType } from '@oc/contracts';
import { type EventStore, openSqliteStores, type StoredEvent } from '@oc/eventstore';
import { EventStoreEventBus, type ServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { pino, type Logger } from 'pino';
import { generate } from 'selfsigned';
import Stripe from 'stripe';
import { vi } from 'vitest';
import { createWebhook, type WebhookSettings } from '../src/app';
import type { Timers } from '../src/application/scheduler';

/** Timers driven by a ManualClock: `advance(ms)` moves the clock and fires whatever fell due. */
export class ManualTimers implements Timers {
  private readonly due = new Set<{ at: number; callback: () => void }>();

  constructor(private readonly clock: ManualClock) {}

  after(ms: number, callback: () => void) {
    const timer = { at: this.clock.now() + Math.max(0, ms), callback };
    this.due.add(timer);
    return () => {
      this.due.delete(timer);
    };
  }

  /** Fires every timer due now (including ones set while firing). */
  fire() {
    for (;;) {
      const ready = [...this.due].filter((t) => t.at <= this.clock.now()).sort((a, b) => a.at - b.at)[0];
      if (!ready) return;
      this.due.delete(ready);
      ready.callback();
    }
  }

  advance(ms: number) {
    this.clock.advance(ms);
    this.fire();
  }

  /** When the earliest timer is set to fire, or undefined when none is set. */
  get next(): number | undefined {
    const times = [...this.due].map((t) => t.at);
    return times.length ? Math.min(...times) : undefined;
  }
}

export interface Received {
  headers: IncomingMessage['headers'];
  rawBody: string;
  /** Real time of arrival. */
  at: number;
}

export type Respond = (req: Received, res: ServerResponse) => void | Promise<void>;

/** A real local receiver (plain HTTP, or HTTPS with a certificate from a CA made for the test). */
export interface Receiver {
  url: string;
  received: Received[];
  respond: Respond;
  close(): Promise<void>;
}

const ok: Respond = (_req, res) => {
  res.writeHead(204).end();
};

function listen(server: Server, scheme: 'http' | 'https', respond: Respond): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    received: [],
    respond,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received = { headers: req.headers, rawBody: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      receiver.received.push(received);
      void receiver.respond(received, res);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      receiver.url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      resolve(receiver);
    });
  });
}

export const httpReceiver = (respond: Respond = ok) => listen(createHttpServer(), 'http', respond);

export interface TestCa {
  /** PEM of the CA a sender must trust. */
  ca: string;
  key: string;
  cert: string;
}

/** A CA and a certificate it signed for 127.0.0.1 / localhost, made fresh for the test. */
export async function testCertificates(): Promise<TestCa> {
  const notAfterDate = new Date(Date.now() + 86_400_000);
  const ca = await generate([{ name: 'commonName', value: 'OC Test CA' }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
  });
  return { ca: ca.cert, key: server.private, cert: server.cert };
}

export const httpsReceiver = (tls: TestCa, respond: Respond = ok) =>
  listen(createHttpsServer({ key: tls.key, cert: tls.cert }), 'https', respond);

export const TEST_SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

export const testSettings = (overrides: Partial<WebhookSettings> = {}): WebhookSettings => ({
  secretKey: TEST_SECRET_KEY,
  retryDelaysMs: [0, 1_000, 5_000, 25_000],
  timeoutMs: 5_000,
  maxResponseBytes: 1_024,
  disableAfterFailures: 10,
  maxConcurrent: 20,
  maxConcurrentPerEndpoint: 1,
  rotationGraceSeconds: 86_400,
  allowPrivate: true,
  streamReplayEvents: 100,
  ...overrides,
});

export interface InProcessWebhook {
  clock: ManualClock;
  timers: ManualTimers;
  store: EventStore;
  app: Awaited<ReturnType<typeof createWebhook>>;
  /** What the video service would append: a `Video*` event on the video's stream. */
  emitVideo(type: VideoNotificationType, orgId: string, video?: Partial<VideoEventData>): Promise<StoredEvent>;
  /** Fires due timers until `check` passes. */
  until(check: () => void | Promise<void>): Promise<void>;
  /** Stops the webhook service (as a crash would, nothing is flushed) and starts it again on the same store. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export const completedVideo = (overrides: Partial<VideoEventData> = {}): VideoEventData => ({
  id: 'video_abc',
  object: 'video',
  created: 1_767_225_600,
  model: 'video-2',
  prompt: 'A calico cat playing a piano on stage',
  status: 'completed',
  progress: 100,
  url: 'https://cdn.example.com/video_abc.mp4',
  seconds: '8',
  size: '1280x720',
  cost: { amount: 0.8, currency: 'usd' },
  ...overrides,
});

/** Name resolution for tests: no network, and a name that resolves to a private address. */
export const TEST_HOSTS: Record<string, string[]> = {
  'hooks.example.com': ['93.184.215.14'],
  'internal.example': ['10.0.0.7'],
  'compatible.example': ['2606:4700::1', '::a00:7'],
  localhost: ['127.0.0.1', '::1'],
};

/** The webhook service in this process over a SQLite file, the embedded bus and a manual clock. */
export async function startInProcess(settings: WebhookSettings, options: { logger?: Logger; client?: Pick<ServiceClient, 'broadcast'> } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'oc-webhook-'));
  const clock = new ManualClock(Date.now());
  const timers = new ManualTimers(clock);
  const stores = openSqliteStores({ filename: join(dir, 'events.sqlite'), clock });
  const logger = options.logger ?? pino({ level: 'silent' });
  let seq = 0;
  const start = () =>
    createWebhook({
      eventStore: stores.store,
      readModels: new SqliteReadModelStore({ filename: ':memory:' }),
      bus: new EventStoreEventBus({ eventStores: { video: stores.store, billing: stores.store }, checkpoints: stores.checkpoints }),
      client: options.client ?? { broadcast: async () => {} },
      clock,
      ids: { next: (prefix) => `${prefix}${++seq}${Math.random().toString(36).slice(2, 8)}` },
      logger,
      settings,
      version: '0.1.0',
      timers,
      resolveHost: async (host) => TEST_HOSTS[host] ?? [],
    });
  const running: InProcessWebhook = {
    clock,
    timers,
    store: stores.store,
    app: await start(),
    async emitVideo(type, orgId, video = {}) {
      const status = type === 'VideoCompleted' ? 'completed' : type === 'VideoFailed' ? 'failed' : 'in_progress';
      const data = completedVideo({ status, ...video });
      const stream = `video-${data.id}`;
      await stores.store.appendToStream(stream, [{ type, data: { org_id: orgId, video: data } }], { expectedRevision: 'any' });
      return (await stores.store.readStream(stream)).at(-1)!;
    },
    async until(check) {
      await vi.waitFor(
        async () => {
          timers.fire();
          await check();
        },
        { timeout: 10_000, interval: 10 },
      );
    },
    async restart() {
      await running.app.close();
      running.app = await start();
    },
    async close() {
      await running.app.close();
      await stores.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return running;
}

/** The official SDK a receiver would use; no API calls are made, only `webhooks.constructEvent`. */
export const stripe = new Stripe('sk_test_unused');
