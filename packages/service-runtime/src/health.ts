import { createServer, type Server } from 'node:http';
import { PROBE_PATHS } from '@oc/contracts';

/**
 * A service process's probes on a port of its own: liveness while the process runs, readiness while `ready`
 * resolves (its transport, event store and read models answer). Nothing else is served there.
 */
export async function serveProbes(port: number, host: string, ready: () => Promise<void>): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const answer = (status: number, body: object) =>
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, { status: 'method_not_allowed' });
    if (path === PROBE_PATHS.liveness) return answer(200, { status: 'ok' });
    if (path !== PROBE_PATHS.readiness) return answer(404, { status: 'not_found' });
    ready().then(
      () => answer(200, { status: 'ready' }),
      () => answer(503, { status: 'not_ready' }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
