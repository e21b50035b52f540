import { createConnection } from 'node:net';

/**
 * Whether the NATS server is there. Without it the distributed scenarios skip, unless the run says
 * REQUIRE_NATS=1 (CI does), in which case a missing server fails the run instead.
 */
export async function natsReachable(): Promise<boolean> {
  const url = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
  const reachable = await new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: url.hostname, port: Number(url.port || 4222) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
  if (!reachable && process.env.REQUIRE_NATS === '1') throw new Error(`REQUIRE_NATS=1 but no NATS server at ${url.href}`);
  return reachable;
}
