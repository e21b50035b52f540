import type { AddressInfo } from 'node:net';
import { PROBE_PATHS } from '@oc/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { serveProbes } from '../src/health';

describe('a service process’s probes', () => {
  const servers: Array<{ close(): unknown }> = [];
  afterEach(() => servers.splice(0).forEach((s) => s.close()));

  async function probe(ready: () => Promise<void>) {
    const server = await serveProbes(0, '127.0.0.1', ready);
    servers.push(server);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return async (path: string, method = 'GET') => {
      const res = await fetch(`${base}${path}`, { method });
      return { status: res.status, body: method === 'HEAD' ? null : await res.json() };
    };
  }

  it('is alive while the process runs, and ready while its dependencies answer', async () => {
    let up = true;
    const get = await probe(async () => {
      if (!up) throw new Error('NATS is reconnecting');
    });
    expect(await get(PROBE_PATHS.liveness)).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await get(PROBE_PATHS.readiness)).toEqual({ status: 200, body: { status: 'ready' } });
    up = false;
    expect(await get(PROBE_PATHS.readiness)).toEqual({ status: 503, body: { status: 'not_ready' } });
    expect(await get(PROBE_PATHS.liveness)).toEqual({ status: 200, body: { status: 'ok' } });
  });

  it('serves nothing else', async () => {
    const get = await probe(async () => {});
    expect((await get('/v1/videos')).status).toBe(404);
    expect((await get(PROBE_PATHS.readiness, 'POST')).status).toBe(405);
    expect((await get(`${PROBE_PATHS.readiness}?verbose=1`)).status).toBe(200);
  });
});
