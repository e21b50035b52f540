import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsNames } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsPresence, ReplicaNameInUseError, watchReplicas } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

const fixture = fileURLToPath(new URL('./fixtures/presence-replica.ts', import.meta.url));

describe.skipIf(!(await natsAvailable()))('replica presence over NATS', () => {
  const prefix = `p${uniqueSuffix()}`;
  const connections: NatsConnection[] = [];
  const children: ChildProcess[] = [];
  const connection = async () => {
    const nc = await connect({ servers: NATS_URL });
    connections.push(nc);
    return nc;
  };
  let observer: NatsConnection;
  beforeAll(async () => {
    observer = await connection();
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(connections.map((nc) => nc.close()));
  });

  async function replicaProcess(self: string) {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture, NATS_URL, prefix, 'video', self], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const [ready] = (await once(child.stdout!, 'data')) as [Buffer];
    return Object.assign(child, { incarnation: ready.toString().trim().split(' ')[1]! });
  }

  it('tells a killed replica (SIGKILL) gone at once, and a running one not', async () => {
    const me = await natsPresence(observer, { prefix, service: 'video', self: 'video-1' });
    const other = await replicaProcess('video-2');
    expect(await me.isGone('video-2')).toBe(false);
    expect(await me.isGone('video-1')).toBe(false);

    other.kill('SIGKILL');
    await once(other, 'exit');
    const since = Date.now();
    expect(await me.isGone('video-2')).toBe(true);
    expect(Date.now() - since).toBeLessThan(1_000);
    // A name nobody ever ran under (data written by an earlier deployment) is gone too.
    expect(await me.isGone('video-from-last-year')).toBe(true);
    await me.stop();
  });

  it('keeps replicas of other services and other deployments apart', async () => {
    const video = await natsPresence(await connection(), { prefix, service: 'video', self: 'same-name' });
    const chat = await natsPresence(await connection(), { prefix, service: 'chat', self: 'same-name' });
    const elsewhere = await natsPresence(await connection(), { prefix: `${prefix}x`, service: 'video', self: 'x' });
    expect(await elsewhere.isGone('same-name')).toBe(true);
    expect(await chat.isGone('other')).toBe(true);
    await video.stop();
    expect(await chat.isGone('same-name')).toBe(false);
    await Promise.all([chat.stop(), elsewhere.stop()]);
  });

  it('does not call a replica gone that is only slow to answer', async () => {
    const nc = await connection();
    // Listening, never answering: a replica whose event loop is stuck.
    nc.subscribe(natsNames(prefix).presence('webhook', 'stuck'), { callback: () => undefined });
    await nc.flush();
    const me = await natsPresence(await connection(), { prefix, service: 'webhook', self: 'me', timeoutMs: 200 });
    expect(await me.isGone('stuck')).toBe(false);
    await me.stop();
  });

  it('refuses a second running process under the same name', async () => {
    await replicaProcess('billing-1');
    await expect(natsPresence(await connection(), { prefix, service: 'video', self: 'billing-1' })).rejects.toBeInstanceOf(ReplicaNameInUseError);
    // Names with dots and wildcards are one subject token each.
    const dotted = await natsPresence(await connection(), { prefix, service: 'video', self: 'web-1.example.*' });
    expect(await dotted.isGone('web-1.example.*')).toBe(false);
    const me = await natsPresence(await connection(), { prefix, service: 'video', self: 'me' });
    expect(await me.isGone('web-1.example.*')).toBe(false);
    expect(await me.isGone('web-1')).toBe(true);
    await Promise.all([dotted.stop(), me.stop()]);
  });

  it("tells a caller watching a process that it is gone once it is killed, or once another process answers under its name", async () => {
    const watch = watchReplicas(async () => observer, { prefix, intervalMs: 50 });
    const gone = (replica: string, incarnation: string) => new Promise<void>((resolve) => watch.watch('video', replica, incarnation, resolve));
    const first = await replicaProcess('video-w');
    const killed = gone('video-w', first.incarnation);
    first.kill('SIGKILL');
    await once(first, 'exit');
    await killed;

    // Started again under its name (a pod restarted in place): the process a caller was waiting on is still gone.
    const second = await replicaProcess('video-w');
    expect(second.incarnation).not.toBe(first.incarnation);
    let secondGone = false;
    watch.watch('video', 'video-w', second.incarnation, () => (secondGone = true));
    await gone('video-w', first.incarnation);
    expect(secondGone).toBe(false);
    watch.stop();
  });
});
