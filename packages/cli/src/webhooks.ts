import { randomBytes } from 'node:crypto';
import type { EventStreamReady, WebhookEnvelope } from '@oc/contracts';
import { formatSecret, signedRequest } from '@oc/webhook/signature';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import pkg from '../package.json' with { type: 'json' };
import { reason } from './client';
import { CliError, type Command, type Context, time, UsageError } from './command';
import { profilePath, readProfile, saveProfile } from './profile';

/** What a receiver gets in `User-Agent` from the CLI (real deliveries send `OC-Webhooks/<release>`). */
const USER_AGENT = `OC-Webhooks/${pkg.version} (oc webhooks listen)`;
/** The deliveries' deadline: a local receiver slower than this is reported as failed. */
const FORWARD_TIMEOUT_MS = 30_000;
/** The stream sends a comment every 15 s; this long without a byte and the connection is taken for dead. */
const SILENCE_MS = 45_000;
const MAX_RECONNECT_DELAY_MS = 30_000;

export const WEBHOOK_COMMANDS: Command[] = [
  {
    usage:
      'oc webhooks listen --forward-to URL [--events video.completed,…] [--print-secret]  (forwards this organization\'s events, signed, to a local URL)',
    words: ['webhooks', 'listen'],
    args: 0,
    options: ['forward-to', 'events', 'print-secret'],
    async exec(ctx, _, values) {
      if (values['print-secret']) {
        const secret = await listenSecret(ctx);
        ctx.print({ secret }, () => secret);
        return;
      }
      const forwardTo = values['forward-to'];
      if (!forwardTo) throw new UsageError('--forward-to is required (e.g. --forward-to http://localhost:3000/hook)');
      if (!/^https?:$/.test(urlOf(forwardTo)?.protocol ?? '')) throw new UsageError(`--forward-to must be an http:// or https:// URL, got "${forwardTo}"`);
      await listen(ctx, forwardTo, values.events);
    },
  },
];

const urlOf = (text: string) => {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
};

/**
 * The secret forwarded events are signed with: kept in the profile file (0600) so that it is the same on
 * every run and the local receiver's configuration outlives a restart of `oc webhooks listen`. Where the
 * profile cannot be written, one made for this run.
 */
async function listenSecret({ io }: Context): Promise<string> {
  const path = profilePath(io.env);
  const profile = await readProfile(path);
  if (profile.webhook_listen_secret) return profile.webhook_listen_secret;
  const secret = formatSecret(randomBytes(32));
  try {
    await saveProfile(path, { ...profile, webhook_listen_secret: secret });
  } catch (error) {
    io.stderr.write(`warning: cannot keep the signing secret in ${path} (${(error as Error).message}); this one lasts for this run only\n`);
  }
  return secret;
}

interface Forwarded {
  event_id: string;
  type: string;
  /** Null for billing's events, which are about no video. */
  video_id: string | null;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

/**
 * Reads `GET /v1/webhooks/events/stream` and POSTs each event to `forwardTo`, signed as the service signs
 * its deliveries, one at a time in the stream's order (a slow receiver slows the reading down, and the
 * service ends a stream that falls too far behind: it is then resumed). A lost stream is opened again after
 * a delay that doubles up to 30 s, with `Last-Event-ID`, so the service sends what was missed meanwhile.
 */
async function listen(ctx: Context, forwardTo: string, events: string | undefined): Promise<void> {
  const { io, api, json } = ctx;
  const secret = await listenSecret(ctx);
  const stop = new AbortController();
  const interrupt = io.interrupt;
  const onSignal = () => stop.abort();
  if (interrupt) interrupt.addEventListener('abort', onSignal, { once: true });
  else {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
  const status = (line: string) => io.stderr.write(`${line}\n`);
  const path = `/v1/webhooks/events/stream${events ? `?events=${encodeURIComponent(events)}` : ''}`;
  let lastEventId: string | undefined;
  let forwarded = 0;
  let connected = false;
  let delay = io.reconnectDelayMs;

  const forward = async (envelope: WebhookEnvelope, raw: string): Promise<void> => {
    const nowSeconds = Math.floor(Date.now() / 1000);
    const request = signedRequest(forwardTo, envelope, [secret], nowSeconds, 1, USER_AGENT);
    // The body is the event as the stream carried it, which is what a delivery's body is.
    if (request.body !== raw) throw new CliError(`event ${envelope.id} did not survive parsing unchanged; not forwarded`);
    const started = performance.now();
    const outcome: Forwarded = { event_id: envelope.id, type: envelope.type, video_id: envelope.data.object === 'video' ? envelope.data.id : null, status_code: null, duration_ms: 0, error: null };
    try {
      const response = await io.fetch(forwardTo, {
        method: 'POST',
        headers: request.headers,
        body: request.body,
        redirect: 'manual',
        signal: AbortSignal.any([stop.signal, AbortSignal.timeout(FORWARD_TIMEOUT_MS)]),
      });
      await response.arrayBuffer().catch(() => undefined);
      outcome.status_code = response.status;
    } catch (error) {
      if (stop.signal.aborted) return;
      outcome.error = (error as Error).name === 'TimeoutError' ? `no answer within ${FORWARD_TIMEOUT_MS / 1000} s` : reason(error);
    }
    outcome.duration_ms = Math.round(performance.now() - started);
    forwarded++;
    if (json) io.stdout.write(`${JSON.stringify(outcome)}\n`);
    else {
      const answer = outcome.error ? `failed: ${outcome.error}` : `${outcome.status_code}`;
      io.stdout.write(`${time(nowSeconds)}  ${envelope.type.padEnd(16)}  ${envelope.id}  ${outcome.video_id ?? envelope.data.object}  → ${answer} (${outcome.duration_ms} ms)\n`);
    }
  };

  try {
    while (!stop.signal.aborted) {
      const connection = new AbortController();
      const signal = AbortSignal.any([stop.signal, connection.signal]);
      let lost = 'the stream ended';
      try {
        const response = await api.open('GET', path, undefined, 'text/event-stream', {
          headers: lastEventId ? { 'last-event-id': lastEventId } : {},
          signal,
        });
        const received: EventSourceMessage[] = [];
        const parser = createParser({ onEvent: (message) => received.push(message) });
        const decoder = new TextDecoder();
        let silence = setTimeout(() => connection.abort(), SILENCE_MS);
        try {
          for await (const bytes of response.body!) {
            clearTimeout(silence);
            silence = setTimeout(() => connection.abort(), SILENCE_MS);
            parser.feed(decoder.decode(bytes, { stream: true }));
            for (const message of received.splice(0)) {
              if (stop.signal.aborted) break;
              if (message.event === 'ready') {
                const ready = JSON.parse(message.data) as EventStreamReady;
                delay = io.reconnectDelayMs;
                if (!connected) {
                  connected = true;
                  status(`Ready! Forwarding ${ready.events.join(', ')} events of ${ready.organization_id} to ${forwardTo} (Ctrl-C stops)`);
                  status(`Signed with ${secret} (the same on every run; oc webhooks listen --print-secret prints it)`);
                } else {
                  status(`Reconnected${ready.resumed_after ? `; resuming after ${ready.resumed_after}` : ''}`);
                }
              } else if (message.event === 'gap') {
                status(`warning: ${(JSON.parse(message.data) as { message: string }).message}`);
              } else if (message.event === 'error') {
                const { error } = JSON.parse(message.data) as { error: { message: string; code: string } };
                // A key that is no longer valid will not become valid by reconnecting.
                if (error.code === 'invalid_api_key') throw new CliError(`${error.message} (${error.code})`);
                lost = `${error.message} (${error.code})`;
              } else if (message.id && message.event) {
                await forward(JSON.parse(message.data) as WebhookEnvelope, message.data);
                lastEventId = message.id;
              }
            }
          }
        } finally {
          clearTimeout(silence);
        }
        if (connection.signal.aborted) lost = `nothing received for ${SILENCE_MS / 1000} s`;
      } catch (error) {
        if (stop.signal.aborted) break;
        if (error instanceof CliError && !error.retryable) throw error;
        lost = error instanceof CliError ? error.message : connection.signal.aborted ? `nothing received for ${SILENCE_MS / 1000} s` : reason(error);
      }
      if (stop.signal.aborted) break;
      status(`${connected ? 'Connection lost' : 'Not connected'} (${lost}); trying again in ${formatDelay(delay)}`);
      await pause(delay, stop.signal);
      delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
    }
  } finally {
    if (interrupt) interrupt.removeEventListener('abort', onSignal);
    else {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }
  status(`Stopped; ${forwarded} event${forwarded === 1 ? '' : 's'} forwarded`);
}

const formatDelay = (ms: number) => (ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
