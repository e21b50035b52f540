import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError, ManualClock, ok, type Replicas, type Reply, sortableIds, Subjects } from '@oc/contracts';
import { SqliteEventStore } from '@oc/eventstore';
import type { ServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClockScheduler } from '../src/adapters/scheduler';
import { createVideo } from '../src/app';
import { VideoConfigSchema } from '../src/config';

/** Billing as two video replicas see it: one account of reservations, each settled once at most. */
class Ledger {
  readonly reserves: string[] = [];
  readonly captures: string[] = [];
  readonly releases: string[] = [];
  private readonly open = new Set<string>();
  /** Reserve, then never answer: the replica that asked dies before it hears back. */
  hangingReserves = 0;

  async request<T>(subject: string, payload: { reservation_id: string }): Promise<Reply<T>> {
    const id = payload.reservation_id;
    if (subject === Subjects.billing.reserveFunds) {
      if (!this.open.has(id)) this.reserves.push(id);
      this.open.add(id);
      if (this.hangingReserves > 0) {
        this.hangingReserves--;
        return new Promise(() => undefined);
      }
    } else if (subject === Subjects.billing.captureReservation) {
      if (this.open.delete(id)) this.captures.push(id);
    } else if (subject === Subjects.billing.releaseReservation) {
      if (this.open.delete(id)) this.releases.push(id);
    }
    return ok({ reservation_id: id } as T);
  }
}

const T0 = Date.UTC(2026, 10, 22, 12);
const request = { org_id: 'org_1', mode: 'live' as const, model: 'video-2' as const, prompt: 'A lighthouse in a storm', seconds: '4' as const, size: '1280x720' as const };

/**
 * Two video replicas as two processes would be: each its own connection to one event-store file (neither
 * polling it on its own within a test), its own read models and scheduler, one storage directory, one
 * billing. Which replicas are alive is the test's to say, as NATS presence would.
 */
describe('video replicas on one event store', () => {
  let dir: string;
  let clock: ManualClock;
  let billing: Ledger;
  let alive: Set<string>;
  const running: Array<{ close(): Promise<void> }> = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-video-replicas-'));
    clock = new ManualClock(T0);
    billing = new Ledger();
    alive = new Set();
  });
  afterEach(async () => {
    for (const r of running.splice(0).reverse()) await r.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function replica(name: string) {
    alive.add(name);
    const eventStore = new SqliteEventStore({ filename: join(dir, 'events.sqlite'), clock, pollIntervalMs: 3_600_000 });
    const scheduler = new ClockScheduler(clock, () => undefined, 3_600_000);
    const replicas: Replicas = { self: name, shared: true, isGone: async (other) => other !== name && !alive.has(other) };
    const video = await createVideo({
      eventStore,
      readModels: new SqliteReadModelStore({ filename: join(dir, `read-models-${name}.sqlite`) }),
      client: billing as unknown as ServiceClient,
      clock,
      ids: sortableIds,
      logger: createLogger({ service: name, level: 'silent' }),
      config: VideoConfigSchema.parse({ SIM_VIDEO_DURATION_MS: '4000', SIM_VIDEO_PRERENDER: '0' }),
      publicBaseUrl: 'https://api.example.com',
      dataDir: join(dir, 'video'),
      scheduler,
      replicas,
    });
    await video.listening();
    const handle = {
      ...video,
      runDue: async () => {
        for (let i = 0; i < 4; i++) await scheduler.runDue();
      },
      /** SIGKILL, as far as the others can tell: it stops answering presence, and its scheduler stops. */
      async kill() {
        alive.delete(name);
        await scheduler.close();
      },
      close: async () => {
        await video.close();
        await eventStore.close();
      },
    };
    running.push(handle);
    return handle;
  }

  it('lets a GET on one replica see a video created on the other at once', async () => {
    const [a, b] = [await replica('video-a'), await replica('video-b')];
    const created = await a.service.create(request);
    // Its job starts at once on video-a; video-b sees it, from the first state on.
    expect((await b.service.get({ org_id: 'org_1', video_id: created.id })).status).toMatch(/^(queued|in_progress)$/);
    expect((await b.service.list({ org_id: 'org_1', limit: 20, order: 'desc' })).data.map((v) => v.id)).toEqual([created.id]);
  });

  it('creates one video and holds its price once when both replicas race on one Idempotency-Key', async () => {
    const [a, b] = [await replica('video-a'), await replica('video-b')];
    const keyed = { ...request, idempotency_key: 'order-42' };
    const answers = await Promise.all([a, b, a, b].map((r) => r.service.create(keyed)));
    expect(new Set(answers.map((v) => v.id)).size).toBe(1);
    expect(billing.reserves).toEqual([answers[0]!.id]);
    expect(answers.every((v) => v.status === 'queued')).toBe(true);
    // The same key with another body, on either replica: refused.
    const reused = await b.service.create({ ...keyed, prompt: 'Another prompt entirely' }).catch((e: unknown) => e);
    expect(reused).toBeInstanceOf(ApiError);
    expect(reused).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
  });

  it('runs each job on one replica only, and a job whose replica was killed is finished by another, charged once', async () => {
    const [a, b] = [await replica('video-a'), await replica('video-b')];
    const created = await a.service.create(request);
    await a.runDue();
    await b.runDue();
    expect((await b.service.get({ org_id: 'org_1', video_id: created.id })).status).toBe('in_progress');
    // While video-a lives, video-b takes nothing over.
    expect(await b.jobs.takeOverFromGoneReplicas()).toBe(0);

    await a.kill();
    expect(await b.jobs.takeOverFromGoneReplicas()).toBe(1);
    clock.advance(4_000);
    await b.runDue();
    expect(await a.service.get({ org_id: 'org_1', video_id: created.id })).toMatchObject({ status: 'completed', progress: 100 });
    expect(billing.captures).toEqual([created.id]);
    expect(billing.releases).toEqual([]);

    // video-a was only cut off, not dead: its next step for the job changes nothing.
    const before = (await b.service.get({ org_id: 'org_1', video_id: created.id })).progress;
    await a.jobs.step(created.id);
    expect((await b.service.get({ org_id: 'org_1', video_id: created.id })).progress).toBe(before);
    expect(billing.captures).toEqual([created.id]);
  });

  it('resumes on start the jobs of replicas that are gone, and leaves a live replica its own', async () => {
    const a = await replica('video-a');
    const b = await replica('video-b');
    const ofA = await a.service.create(request);
    const ofB = await b.service.create(request);
    await a.kill();
    const c = await replica('video-c');
    expect(await c.jobs.resume()).toBe(1);
    await c.runDue();
    await b.runDue();
    clock.advance(4_000);
    await c.runDue();
    await b.runDue();
    expect(new Set(billing.captures)).toEqual(new Set([ofA.id, ofB.id]));
    expect(billing.captures).toHaveLength(2);
  });

  it('releases at once what a create held when the replica making it was killed, instead of after a minute', async () => {
    const [a, b] = [await replica('video-a'), await replica('video-b')];
    billing.hangingReserves = 1;
    void a.service.create(request).catch(() => undefined);
    await vi.waitFor(() => expect(billing.reserves).toHaveLength(1), { timeout: 5_000, interval: 5 });
    const [id] = billing.reserves;
    await a.kill();
    expect(await b.jobs.takeOverFromGoneReplicas()).toBe(1);
    await b.runDue();
    expect(billing.releases).toEqual([id]);
    // Neither visible nor charged; the replica cut off, were it still alive, could not accept it now.
    await expect(b.service.get({ org_id: 'org_1', video_id: id! })).rejects.toMatchObject({ detail: { kind: 'NotFound' } });
  });
});
