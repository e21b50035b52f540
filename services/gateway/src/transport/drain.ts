import type { RequestListener } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROBE_PATHS, serviceUnavailable } from '@oc/contracts';
import { sendError } from './http';

/** What a request gets from a gateway that is stopping: another gateway may take it at once. */
export const shuttingDown = () => serviceUnavailable('This server is shutting down; retry the request.');

/**
 * After the cut at the end of the grace, how long the requests cut have to end (an error event written, a 503
 * sent) before the connections are closed under them.
 */
const ENDED_AFTER_CUT_MS = 1_000;

const isProbe = (url: string | undefined) => {
  const path = (url ?? '').split('?')[0];
  return path === PROBE_PATHS.liveness || path === PROBE_PATHS.readiness;
};

/**
 * A gateway's stop (SIGTERM): from `drain` on it is not ready, and answers each new request 503
 * service_unavailable and closes its connection (the probes still answer: readiness with its 503); the requests
 * in flight may finish for the grace, then those still running are cut (`cut`).
 */
export class Drain {
  /** Aborted once the grace is over: the chat completions still running are given up. */
  readonly cut = new AbortController();
  private inFlight = 0;
  private idle: (() => void) | undefined;
  private started = false;

  get draining(): boolean {
    return this.started;
  }

  /** `app`, counting the requests in flight and refusing new ones once draining. */
  listener(app: RequestListener): RequestListener {
    return (req, res) => {
      if (isProbe(req.url)) return app(req, res);
      if (this.started) {
        res.setHeader('Connection', 'close');
        return sendError(res, shuttingDown());
      }
      this.inFlight++;
      res.once('close', () => {
        if (--this.inFlight === 0) this.idle?.();
      });
      app(req, res);
    };
  }

  /** Refuses new requests from now on, and resolves once those in flight have ended, cut after `graceMs`. */
  async drain(graceMs: number): Promise<void> {
    this.started = true;
    if (await this.ended(graceMs)) return;
    this.cut.abort();
    await this.ended(ENDED_AFTER_CUT_MS);
  }

  /** Whether every request in flight ended within `ms`. */
  private async ended(ms: number): Promise<boolean> {
    if (this.inFlight === 0) return true;
    const waited = new AbortController();
    const timeUp = sleep(ms, false, { signal: waited.signal }).catch(() => false);
    const ended = await Promise.race([new Promise<boolean>((resolve) => (this.idle = () => resolve(true))), timeUp]);
    waited.abort();
    return ended;
  }
}
