import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Customer, customersOf } from './agents-support';
import { type RunningService, standaloneProcess } from './harness';
import { MICROS_PER_TOKEN } from './money';

/**
 * Issue 27, "no parameter silently ignored", for what the simulator cannot show: the Chat Completions fields that
 * only a provider acts on (sampling, caching, abuse tracking, reasoning) are honoured by reaching it. The service
 * runs with an OpenAI-compatible deployment (OPENAI_API_KEY, OPENAI_BASE_URL) that is a local server recording
 * each body it is sent; each field must arrive there as the customer sent it, or be refused with 400
 * `unsupported_parameter` naming it. The walk over every SDK field is agents-parameters.e2e.spec.ts.
 */

const PASSED_ON: Record<string, unknown> = {
  frequency_penalty: 0.5,
  logit_bias: { '1734': -100 },
  presence_penalty: 0.5,
  prompt_cache_key: 'gardens-faq',
  prompt_cache_retention: 'in-memory',
  reasoning_effort: 'low',
  safety_identifier: 'user-7f3a',
  temperature: 0.2,
  top_p: 0.9,
  user: 'user-7f3a',
  verbosity: 'low',
};
const USAGE = { prompt_tokens: 14, completion_tokens: 6, total_tokens: 20 };

let upstream: Server;
const received: Array<Record<string, any>> = [];
let service: RunningService;
let customers: ReturnType<typeof customersOf>;
let live: Customer;

beforeAll(async () => {
  upstream = createServer(async (req, res) => {
    let raw = '';
    for await (const part of req) raw += part;
    received.push(JSON.parse(raw));
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: 'chatcmpl-upstream',
        object: 'chat.completion',
        created: 1_767_225_600,
        model: 'upstream-model',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Gardens bring neighbours together.' }, finish_reason: 'stop' }],
        usage: USAGE,
      }),
    );
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  service = await standaloneProcess({ OPENAI_API_KEY: 'sk-upstream-fake', OPENAI_BASE_URL: base, CHAT_SIMULATOR_WORD_DELAY_MS: '0' });
  customers = customersOf(service);
  live = await customers.newCustomer('live');
});
afterAll(async () => {
  await service?.stop();
  await new Promise((resolve) => upstream?.close(resolve));
});

describe('Chat Completions fields only a provider acts on reach the OpenAI-compatible deployment', () => {
  it.each(Object.entries(PASSED_ON))('%s', async (field, value) => {
    const meter = await customers.meter(live);
    const sent = received.length;
    const res = await customers.api.call('POST', '/v1/chat/completions', {
      token: live.key,
      body: { model: 'chat-2', messages: [{ role: 'user', content: 'How do community gardens change a neighbourhood?' }], [field]: value },
    });
    if (res.status === 200) {
      expect(received).toHaveLength(sent + 1);
      expect(received.at(-1)![field]).toEqual(value);
      // The provider's usage is what is charged.
      expect(res.body.usage).toEqual(USAGE);
      const charged = await meter.charged();
      expect(charged.micros).toBe(USAGE.total_tokens * MICROS_PER_TOKEN);
    } else {
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'unsupported_parameter', param: field });
      expect(received).toHaveLength(sent);
      expect((await meter.charged()).micros).toBe(0);
    }
  });
});
