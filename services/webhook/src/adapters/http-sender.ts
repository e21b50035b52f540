import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { rootCertificates } from 'node:tls';
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from 'request-filtering-agent';
import type { AttemptOutcome } from '../domain/delivery';
import { agentFilter, connectAddress, type DestinationRules } from './destinations';

export interface WebhookRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** Sends one signed POST; never throws: every failure is an outcome to record. */
export interface WebhookSender {
  send(request: WebhookRequest): Promise<AttemptOutcome>;
}

export interface HttpSenderOptions {
  /** One deadline for the whole exchange: connect, TLS, headers and body. */
  timeoutMs: number;
  /** How much of the receiver's answer is read and kept for the delivery log. */
  maxResponseBytes: number;
  /** Which addresses a delivery may connect to. */
  destinations: DestinationRules;
  /** Extra trusted CAs (PEM); the system's are always trusted, and certificates are always verified. */
  ca?: string[] | undefined;
  /** How a connection resolves a host name; `dns.lookup` by default. */
  lookup?: LookupFunction | undefined;
}

/** Worded without the address: a refusal must not tell a customer what a name resolved to. */
const refusal = () => new Error('the destination is not allowed');

/**
 * Resolution that judges every address a connection may use by our rules, then hands on the address to connect
 * to (the IPv4 one for an IPv6 form carrying it), so the agent's own check and the socket see that address.
 */
function judgedLookup(resolve: LookupFunction, rules: DestinationRules): LookupFunction {
  return (hostname, options, callback) =>
    resolve(hostname, options, (error, address: string | LookupAddress[], family?: number) => {
      if (error) return callback(error, address as string, family);
      const found = typeof address === 'string' ? [{ address, family: family ?? isIP(address) }] : address;
      const judged = found.map((a) => connectAddress(a.address, rules));
      if (judged.some((a) => a === undefined)) return callback(refusal(), '', 0);
      const usable = judged.map((a) => ({ address: a!, family: isIP(a!) }));
      if (options.all) return callback(null, usable);
      return callback(null, usable[0]!.address, usable[0]!.family);
    });
}

/**
 * Node's http(s) client behind `request-filtering-agent`: the address check runs inside the
 * connection's DNS lookup, on the very address the socket then connects to (no re-resolution, so DNS
 * rebinding cannot slip past it), and IP literals are checked the same way. Our rules (`connectAddress`,
 * which also judges IPv6 forms carrying an IPv4 address) run first, the agent's after them. Redirects are never
 * followed, since node's client does not follow them: a 3xx is simply not a 2xx.
 */
export class HttpWebhookSender implements WebhookSender {
  private readonly httpAgent: RequestFilteringHttpAgent;
  private readonly httpsAgent: RequestFilteringHttpsAgent;
  private readonly lookup: LookupFunction;

  constructor(private readonly options: HttpSenderOptions) {
    this.lookup = judgedLookup(options.lookup ?? (dnsLookup as LookupFunction), options.destinations);
    const filter = { ...agentFilter(options.destinations), keepAlive: false };
    this.httpAgent = new RequestFilteringHttpAgent(filter);
    this.httpsAgent = new RequestFilteringHttpsAgent({
      ...filter,
      rejectUnauthorized: true,
      ...(options.ca ? { ca: [...rootCertificates, ...options.ca] } : {}),
    });
  }

  send(request: WebhookRequest): Promise<AttemptOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const { timeoutMs, maxResponseBytes } = this.options;
    const url = this.target(request.url);
    if (typeof url === 'string') {
      return Promise.resolve({ success: false, statusCode: null, error: url, responseBody: null, durationMs: elapsed() });
    }
    return new Promise<AttemptOutcome>((resolve) => {
      let settled = false;
      const finish = (outcome: Omit<AttemptOutcome, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve({ ...outcome, durationMs: elapsed() });
      };
      const isHttps = url.protocol === 'https:';
      const send = isHttps ? httpsRequest : httpRequest;
      const req = send(url, {
        method: 'POST',
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        lookup: this.lookup,
        headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) },
      });
      const deadline = setTimeout(() => {
        finish({ success: false, statusCode: null, error: `timed out after ${timeoutMs} ms`, responseBody: null });
        req.destroy();
      }, timeoutMs);
      req.on('error', (error) => finish({ success: false, statusCode: null, error: describe(error), responseBody: null }));
      req.on('response', (res: IncomingMessage) => {
        const statusCode = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let kept = 0;
        const done = () => {
          const responseBody = Buffer.concat(chunks).toString('utf8');
          const success = statusCode >= 200 && statusCode < 300;
          finish({ success, statusCode, error: success ? null : `HTTP ${statusCode}`, responseBody });
          res.destroy();
        };
        res.on('data', (chunk: Buffer) => {
          if (kept < maxResponseBytes) {
            chunks.push(chunk.subarray(0, maxResponseBytes - kept));
            kept += Math.min(chunk.length, maxResponseBytes - kept);
          }
          // The cap reached: what follows is neither read nor waited for.
          if (kept >= maxResponseBytes) done();
        });
        res.on('end', done);
        res.on('error', (error) => finish({ success: false, statusCode, error: describe(error), responseBody: null }));
      });
      req.end(request.body);
    });
  }

  /** The URL to request, or why there is none. A literal is connected to without resolution: judged here. */
  private target(raw: string): URL | string {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return 'invalid URL';
    }
    const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(literal) === 0) return url;
    const address = connectAddress(literal, this.options.destinations);
    if (address === undefined) return describe(refusal());
    url.hostname = isIP(address) === 6 ? `[${address}]` : address;
    return url;
  }

  close() {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

function describe(error: unknown): string {
  const e = error as { code?: string; message?: string };
  // The agent's refusal names the address a host name resolved to: never shown to a customer (an oracle for internal DNS).
  if (e?.message?.includes('is not allowed')) {
    return 'the destination is not allowed: private, loopback, link-local and metadata addresses are refused';
  }
  return [e.code, e.message].filter(Boolean).join(': ').slice(0, 500) || 'request failed';
}
