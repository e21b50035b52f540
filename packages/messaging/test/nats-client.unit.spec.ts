import { fail, serviceUnavailable } from '@oc/contracts';
import { afterAll, describe, expect, it } from 'vitest';
import { NatsServiceClient } from '../src';

describe('NatsServiceClient without a reachable server', () => {
  const client = new NatsServiceClient({ servers: 'nats://127.0.0.1:1' });
  afterAll(() => client.close());

  it('answers requests with service_unavailable instead of throwing', async () => {
    expect(await client.request('billing.ping', {}, { timeoutMs: 5_000 })).toEqual(fail(serviceUnavailable()));
  });

  it('fails ping, so readiness reports the outage', async () => {
    await expect(client.ping()).rejects.toThrow();
  });
});
