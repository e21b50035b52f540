/**
 * The load process: a child of the bench that runs one job at a time on the bench's request (IPC), so the
 * load generator never shares an event loop with the servers it measures.
 */
import autocannon from 'autocannon';
import type { HttpLoadJob, HttpLoadResult, LoadJob } from './jobs';
import { oneAtATime } from './one-at-a-time';
import { Samples } from './stats';
import { streamLoad } from './stream-client';
import { Receiver, runVideos } from './videos';

/**
 * autocannon's own histogram keeps whole milliseconds; each 2xx response's time is kept here unrounded. Its
 * connections go to the job's origins in turn.
 */
function httpLoad(job: HttpLoadJob): Promise<HttpLoadResult> {
  let next = 0;
  const latency = new Samples();
  const details = new Set<string>();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        // Several URLs take the connections in turn (autocannon's runtime does; its types say one URL).
        url: job.origins as unknown as string,
        connections: job.connections,
        duration: job.durationSeconds,
        requests: [{ setupRequest: (request) => ({ ...request, ...job.requests[next++ % job.requests.length]! }) }],
      },
      (error, result) => {
        if (error) return reject(error as Error);
        for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {})) {
          if (!status.startsWith('2')) details.add(`status ${status}: ${count ?? 0} responses`);
        }
        resolve({
          requests: result['2xx'] + result.non2xx,
          ok: result['2xx'],
          seconds: result.duration,
          rps: result['2xx'] / result.duration,
          p50: latency.percentile(50),
          p99: latency.percentile(99),
          non2xx: result.non2xx,
          errors: result.errors,
          details: [...details].slice(0, 10),
        });
      },
    );
    instance.on('response', (_client, status, _bytes, ms) => {
      if (status >= 200 && status < 300) latency.push(ms);
    });
    instance.on('reqError', (error: Error) => details.add(String(error?.message ?? error)));
  });
}

const receiver = new Receiver();
let receiverPort: Promise<number> | undefined;

function handle(job: LoadJob): Promise<unknown> {
  switch (job.kind) {
    case 'http':
      return httpLoad(job);
    case 'stream':
      return streamLoad(job);
    case 'one-at-a-time':
      return oneAtATime(job);
    case 'receiver':
      receiverPort ??= receiver.listen();
      return receiverPort.then((port) => ({ port }));
    case 'videos':
      return runVideos(job, receiver);
  }
}

process.on('message', (message: { id: number; job: LoadJob }) => {
  handle(message.job).then(
    (result) => process.send!({ id: message.id, result }),
    (error: Error) => process.send!({ id: message.id, error: error.stack ?? String(error) }),
  );
});
process.send!({ ready: true });
