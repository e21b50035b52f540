import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Every bench target runs as a child of the bench: it listens on a free loopback port and says which over IPC. */
export function announce(server: Server): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ port: (server.address() as AddressInfo).port });
  });
}

/** The body A and B answer: the size and shape of ours' `GET /v1/health`, built once. */
export const HEALTH_BODY = JSON.stringify({ status: 'ok', version: '0.1.0', timestamp: '2026-01-01T00:00:00.000Z' });
