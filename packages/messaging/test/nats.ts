import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** Unique names per run, so reruns and parallel files never share subjects, streams or consumers. */
export const uniqueSuffix = () => randomBytes(4).toString('hex');

/**
 * Whether tests needing NATS can run. Unreachable means skip, unless `REQUIRE_NATS=1`: then it
 * throws, so a CI that promises a server fails loudly instead of silently skipping.
 */
export async function natsAvailable(url = NATS_URL): Promise<boolean> {
  try {
    const nc = await connect({ servers: url, reconnect: false, timeout: 2_000 });
    await nc.close();
    return true;
  } catch (error) {
    if (process.env.REQUIRE_NATS === '1') {
      throw new Error(`REQUIRE_NATS=1 but NATS is unreachable at ${url}`, { cause: error });
    }
    return false;
  }
}
