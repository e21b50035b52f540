import type { LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HttpWebhookSender } from '../src/adapters/http-sender';
import { httpReceiver, httpsReceiver, type Receiver, type TestCa, testCertificates } from './support';

/** A resolver answering every name with these addresses. */
const fakeLookup = (addresses: string[]) =>
  vi.fn(((_host: string, options: LookupOptions, callback: (...args: unknown[]) => void) => {
    const all = addresses.map((address) => ({ address, family: isIP(address) }));
    if (options.all) callback(null, all);
    else callback(null, all[0]!.address, all[0]!.family);
  }) as unknown as LookupFunction);
const request = (url: string) => ({ url, body: '{"id":"evt_1"}', headers: { 'content-type': 'application/json' } });
const sender = (options: Partial<ConstructorParameters<typeof HttpWebhookSender>[0]> = {}) =>
  new HttpWebhookSender({ timeoutMs: 2_000, maxResponseBytes: 1_024, destinations: { allowLoopback: false, allowCidrs: [] }, ...options });

let tls: TestCa;
let https: Receiver;
beforeAll(async () => {
  tls = await testCertificates();
  https = await httpsReceiver(tls);
});
afterAll(() => https.close());

describe('SSRF protection in production mode', () => {
  // Each is refused inside the connection's address check, before any packet leaves.
  it.each([
    ['loopback', 'https://127.0.0.1:9/'],
    ['loopback IPv6', 'https://[::1]:9/'],
    ['RFC 1918 10/8', 'https://10.0.0.1/'],
    ['RFC 1918 172.16/12', 'https://172.16.5.4/'],
    ['RFC 1918 192.168/16', 'https://192.168.1.1/'],
    ['IPv6 unique local (ULA)', 'https://[fd12:3456::1]/'],
    ['link-local (cloud metadata)', 'http://169.254.169.254/latest/meta-data/'],
    ['IPv6 link-local', 'https://[fe80::1]/'],
    ['IPv4-mapped IPv6 metadata address', 'http://[::ffff:169.254.169.254]/'],
    ['IPv4-mapped IPv6 loopback', 'https://[::ffff:127.0.0.1]/'],
    ['IPv4-compatible IPv6 loopback', 'https://[::127.0.0.1]:9/'],
    ['IPv4-compatible IPv6 10/8', 'https://[::a00:1]/'],
    ['IPv4-translated IPv6 loopback', 'https://[::ffff:0:127.0.0.1]:9/'],
    ['NAT64 metadata address', 'http://[64:ff9b::169.254.169.254]/'],
    ['6to4 loopback', 'https://[2002:7f00:1::]:9/'],
    ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/'],
    ['carrier-grade NAT 100.64/10', 'https://100.64.0.1/'],
    ['0/8 "this network"', 'https://0.1.2.3/'],
    ['IPv4 multicast', 'https://224.0.0.1/'],
    ['IPv6 multicast', 'https://[ff02::1]/'],
    ['IPv4 unspecified', 'https://0.0.0.0/'],
    ['IPv6 unspecified', 'https://[::]/'],
    ['broadcast', 'https://255.255.255.255/'],
    ['a host name that resolves to loopback', 'https://localhost:9/'],
  ])('refuses %s (%s)', async (_, url) => {
    const outcome = await sender().send(request(url));
    expect(outcome).toMatchObject({ success: false, statusCode: null, responseBody: null });
    expect(outcome.error).toMatch(/is not allowed/);
  });

  it.each([['::7f00:1'], ['::a00:1'], ['2606:4700::1', '::7f00:1'], ['64:ff9b::a9fe:a9fe']])(
    'refuses a host name whose DNS answer holds an IPv6 form of a private IPv4 address (%s)',
    async (...answer) => {
      const lookup = fakeLookup(answer);
      const outcome = await sender({ lookup }).send(request('https://hooks.example.com/x'));
      expect(outcome).toMatchObject({ success: false, statusCode: null, responseBody: null });
      expect(outcome.error).toMatch(/is not allowed/);
      expect(outcome.error).not.toContain(answer.at(-1));
      expect(lookup).toHaveBeenCalled();
    },
  );

  it('does not say what a host name resolved to', async () => {
    const outcome = await sender().send(request('https://localhost:9/'));
    expect(outcome.error).toMatch(/is not allowed/);
    expect(outcome.error).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it.each(['https://10.0.0.1/', 'http://169.254.169.254/latest/meta-data/', 'https://100.64.0.1/', 'https://192.168.1.1/', 'https://[fd00::1]/'])(
    'refuses %s in development mode too, where only loopback is let through',
    async (url) => {
      const outcome = await sender({ destinations: { allowLoopback: true, allowCidrs: [] } }).send(request(url));
      expect(outcome).toMatchObject({ success: false, statusCode: null });
      expect(outcome.error).toMatch(/is not allowed/);
    },
  );

  it('never reaches a real local receiver, even one the sender would trust', async () => {
    const outcome = await sender({ ca: [tls.ca] }).send(request(https.url));
    expect(outcome.error).toMatch(/is not allowed/);
    expect(https.received).toHaveLength(0);
  });
});

describe('the exchange with a receiver (development mode, local receivers allowed)', () => {
  const dev = (options: Partial<ConstructorParameters<typeof HttpWebhookSender>[0]> = {}) =>
    sender({ destinations: { allowLoopback: true, allowCidrs: [] }, ca: [tls.ca], ...options });
  const receivers: Receiver[] = [];
  afterAll(() => Promise.all(receivers.map((r) => r.close())));
  const track = (r: Receiver) => (receivers.push(r), r);

  it('verifies certificates: a self-signed receiver is refused unless its CA is trusted', async () => {
    const before = https.received.length;
    const untrusted = await sender({ destinations: { allowLoopback: true, allowCidrs: [] } }).send(request(https.url));
    expect(untrusted).toMatchObject({ success: false, statusCode: null });
    expect(untrusted.error).toMatch(/certificate|self.signed/i);
    expect(https.received).toHaveLength(before);
    expect(await dev().send(request(https.url))).toMatchObject({ success: true, statusCode: 204 });
  });

  it('does not follow redirects: a 3xx is a failure', async () => {
    const target = track(await httpReceiver());
    const redirecting = track(
      await httpReceiver((_req, res) => {
        res.writeHead(307, { location: target.url }).end();
      }),
    );
    expect(await dev().send(request(redirecting.url))).toMatchObject({ success: false, statusCode: 307, error: 'HTTP 307' });
    expect(target.received).toHaveLength(0);
  });

  it('gives the whole exchange one deadline, so a receiver that trickles its answer cannot hold a worker', async () => {
    const trickling = track(
      await httpReceiver((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const drip = setInterval(() => res.write('.'), 20);
        res.on('close', () => clearInterval(drip));
      }),
    );
    const outcome = await dev({ timeoutMs: 300 }).send(request(trickling.url));
    expect(outcome).toMatchObject({ success: false, statusCode: null, error: 'timed out after 300 ms' });
    expect(outcome.durationMs).toBeLessThan(2_000);
  });

  it('reads and keeps at most the configured number of response bytes', async () => {
    const chatty = track(
      await httpReceiver((_req, res) => {
        res.writeHead(200).end('x'.repeat(100_000));
      }),
    );
    const outcome = await dev({ maxResponseBytes: 64 }).send(request(chatty.url));
    expect(outcome).toMatchObject({ success: true, statusCode: 200, responseBody: 'x'.repeat(64) });
  });

  it('judges an IPv6 form carrying an IPv4 address as that address, and connects to it there', async () => {
    const receiver = track(await httpReceiver());
    const port = new URL(receiver.url).port;
    for (const host of ['[::ffff:127.0.0.1]', '[::127.0.0.1]', 'receiver.example']) {
      const lookup = fakeLookup(['::7f00:1']);
      expect(await dev({ lookup }).send(request(`http://${host}:${port}/`))).toMatchObject({ success: true, statusCode: 204 });
    }
    expect(receiver.received).toHaveLength(3);
    const outcome = await dev().send(request(`http://[::a00:1]:${port}/`));
    expect(outcome.error).toMatch(/is not allowed/);
  });

  it('sends the body as given, with its content length', async () => {
    const receiver = track(await httpReceiver());
    await dev().send(request(receiver.url));
    expect(receiver.received[0]).toMatchObject({ rawBody: '{"id":"evt_1"}', headers: { 'content-length': '14' } });
  });
});
