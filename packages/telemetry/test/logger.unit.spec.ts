import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, withSpan } from '../src';
import { registerTestTracing } from '../src/testing';

function capture() {
  const lines: string[] = [];
  return { lines, records: () => lines.map((l) => JSON.parse(l)), stream: { write: (l: string) => void lines.push(l) } };
}

describe('createLogger', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  beforeAll(() => {
    tracing = registerTestTracing();
  });
  afterAll(() => tracing.shutdown());

  it("never writes a provider's key, as an adapter's option or as the variable that holds it", () => {
    const out = capture();
    const log = createLogger({ service: 'chat' }, out.stream);
    log.warn({ apiKey: 'sk-ant-one', deployment: { apiKey: 'sk-two', model: 'm' }, config: { ANTHROPIC_API_KEY: 'sk-three', FAL_KEY: 'fal-four' }, GEMINI_API_KEY: 'g-five' }, 'x');
    const text = out.lines.join('');
    for (const secret of ['sk-ant-one', 'sk-two', 'sk-three', 'fal-four', 'g-five']) expect(text).not.toContain(secret);
    expect(out.records()[0]).toMatchObject({ deployment: { model: 'm' } });
  });

  it('stamps the service and never writes API keys or webhook secrets', () => {
    const out = capture();
    const log = createLogger({ service: 'gateway' }, out.stream);

    log.info(
      {
        req: { method: 'GET', headers: { authorization: 'Bearer oc_live_req', host: 'api' } },
        headers: { authorization: 'Bearer oc_live_hdr' },
        key: 'oc_live_top',
        created: { key: 'oc_live_created', prefix: 'oc_live_ab' },
        webhook: { secret: 'whsec_one', url: 'https://example.com/hook' },
        principal: { api_key: 'oc_live_principal', key_hash: 'f'.repeat(64) },
        upstream: { authorization: 'Bearer oc_live_upstream' },
      },
      'request',
    );

    const text = out.lines.join('');
    for (const secret of ['oc_live_req', 'oc_live_hdr', 'oc_live_top', 'oc_live_created', 'whsec_one', 'oc_live_principal', 'f'.repeat(64), 'oc_live_upstream']) {
      expect(text).not.toContain(secret);
    }
    const [record] = out.records();
    expect(record).toMatchObject({
      service: 'gateway',
      msg: 'request',
      req: { method: 'GET', headers: { authorization: '[redacted]', host: 'api' } },
      key: '[redacted]',
      created: { key: '[redacted]', prefix: 'oc_live_ab' },
      webhook: { secret: '[redacted]', url: 'https://example.com/hook' },
    });
  });

  it('honours the level', () => {
    const out = capture();
    const log = createLogger({ service: 'gateway', level: 'warn' }, out.stream);
    log.info('dropped');
    log.warn('kept');
    expect(out.records().map((r) => r.msg)).toEqual(['kept']);
  });

  it('adds the active trace id and span id at every level, a child logger\'s lines included, and nothing outside a span', async () => {
    const out = capture();
    const log = createLogger({ service: 'billing', level: 'trace' }, out.stream);
    const levels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

    const ids = await withSpan('credit', {}, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      for (const level of levels) log[level](`inside at ${level}`);
      log.child({ reservation: 'r_1' }).warn('inside, from a child');
      return trace.getActiveSpan()!.spanContext();
    });
    log.info('outside');

    const records = out.records();
    expect(records.slice(0, -1).map((r) => r.msg)).toEqual([...levels.map((level) => `inside at ${level}`), 'inside, from a child']);
    for (const inside of records.slice(0, -1)) expect(inside, inside.msg).toMatchObject({ trace_id: ids.traceId, span_id: ids.spanId });
    expect(ids.traceId).toMatch(/^[0-9a-f]{32}$/);
    const outside = records.at(-1);
    expect(outside).toMatchObject({ msg: 'outside' });
    expect(outside).not.toHaveProperty('trace_id');
    expect(outside).not.toHaveProperty('span_id');
  });
});
