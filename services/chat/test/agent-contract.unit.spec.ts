import { type ChatMessage, parseChatCompletionBody, toApiError } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { trimToContext } from '../src/domain/context';
import { dataUrlSize, imageTokens, MAX_IMAGE_TOKENS, tileTokens } from '../src/domain/image-tokens';
import { instanceOf } from '../src/domain/json-instance';
import { definitionsText, fromStored, messageCost, toStored } from '../src/domain/messages';

describe('a minimal instance of a JSON Schema', () => {
  it('given an object schema with required properties, nested objects, enums and types, when generated, then it has exactly what is required', () => {
    const schema = {
      type: 'object',
      properties: {
        city: { type: 'string' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7 },
        where: { type: 'object', properties: { lat: { type: 'number' }, lon: { type: 'number' } }, required: ['lat', 'lon'], additionalProperties: false },
        tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
        optional: { type: 'boolean' },
      },
      required: ['city', 'unit', 'days', 'where', 'tags'],
      additionalProperties: false,
    };
    expect(instanceOf(schema)).toEqual({ city: 'city', unit: 'celsius', days: 1, where: { lat: 0, lon: 0 }, tags: ['tags', 'tags'] });
  });

  it('given zod-style $defs, anyOf, const, nullable types and formats, when generated, then each is honoured', () => {
    const schema = {
      type: 'object',
      properties: {
        owner: { $ref: '#/$defs/Person' },
        kind: { const: 'garden' },
        note: { anyOf: [{ type: 'string', minLength: 10 }, { type: 'null' }] },
        since: { type: ['string', 'null'], format: 'date-time' },
        ratio: { type: 'number', exclusiveMinimum: 0, multipleOf: 0.5 },
      },
      required: ['owner', 'kind', 'note', 'since', 'ratio'],
      $defs: { Person: { type: 'object', properties: { email: { type: 'string', format: 'email' } }, required: ['email'] } },
    };
    expect(instanceOf(schema)).toEqual({
      owner: { email: 'user@example.com' },
      kind: 'garden',
      note: 'note note note',
      since: '2026-01-01T00:00:00Z',
      ratio: 0.5,
    });
  });

  it('given a recursive schema, when generated, then it stops instead of recursing forever', () => {
    const schema = { $ref: '#/$defs/Node', $defs: { Node: { type: 'object', properties: { next: { $ref: '#/$defs/Node' } }, required: ['next'] } } };
    expect(JSON.stringify(instanceOf(schema))).toContain('null');
  });

  it('given no schema at all, when generated, then it is null (a tool without parameters gets {} from the simulator)', () => {
    expect(instanceOf(undefined)).toBeNull();
    expect(instanceOf({ type: 'object' })).toEqual({});
  });
});

describe('image tokens, as OpenAI documents them', () => {
  it.each([
    [1024, 1024, 765],
    [2048, 4096, 1105],
    [128, 64, 255],
    [768, 2048, 1445],
  ])('given a %ix%i image in high detail, then it costs %i tokens', (w, h, tokens) => {
    expect(tileTokens(w, h)).toBe(tokens);
  });

  const png = (width: number, height: number) => {
    const header = Buffer.alloc(24);
    header.writeUInt32BE(0x89504e47, 0);
    header.writeUInt32BE(0x0d0a1a0a, 4);
    header.write('IHDR', 12, 'latin1');
    header.writeUInt32BE(width, 16);
    header.writeUInt32BE(height, 20);
    return `data:image/png;base64,${header.toString('base64')}`;
  };

  it('given a PNG data URL, when counted, then its header gives the size', () => {
    expect(dataUrlSize(png(1024, 1024))).toEqual({ width: 1024, height: 1024 });
    expect(imageTokens({ type: 'image_url', image_url: { url: png(1024, 1024) } })).toBe(765);
  });

  it('given low detail, then 85 whatever the size; given an https URL, then the documented bound', () => {
    expect(imageTokens({ type: 'image_url', image_url: { url: png(4096, 8192), detail: 'low' } })).toBe(85);
    expect(imageTokens({ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } })).toBe(MAX_IMAGE_TOKENS);
    expect(MAX_IMAGE_TOKENS).toBe(1445);
  });
});

describe('what a message costs', () => {
  it('given parts, tool calls and tool results, when measured, then text, calls and ids are counted and images apart', () => {
    const user: ChatMessage = { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] };
    expect(messageCost(user)).toEqual({ text: 'What is this?', imageTokens: MAX_IMAGE_TOKENS });
    const call: ChatMessage = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] };
    expect(messageCost(call).text).toBe('\nget_weather\n{"city":"Oslo"}');
    expect(messageCost({ role: 'tool', tool_call_id: 'call_1', content: 'sunny' }).text).toBe('call_1\nsunny');
  });

  it('given tools and a response schema, then their JSON is counted with the prompt', () => {
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }];
    expect(definitionsText(tools, { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } })).toBe(
      `${JSON.stringify(tools)}\n${JSON.stringify({ name: 'x', schema: { type: 'object' } })}`,
    );
    expect(definitionsText(undefined, { type: 'json_object' })).toBe('');
  });

  it('given stored messages, when read back, then tool calls, tool results and parts come back as they were sent', () => {
    const sent: ChatMessage[] = [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Hi' }], name: 'ana' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'done' },
    ];
    expect(sent.map((m) => fromStored(toStored(m, 1)))).toEqual(sent);
  });
});

describe('context trimming with tool calls', () => {
  it('given an old tool call and its results, when the context is too small, then they are dropped together', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 's' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'r' },
      { role: 'user', content: 'q' },
    ];
    const kept = trimToContext(messages, [1, 10, 10, 1], 25);
    expect(kept.messages.map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('counts what is always sent (tool definitions) against the context', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'q' }];
    expect(trimToContext(messages, [1], 100, 50).tokens).toBe(1 + 4 + 3 + 50);
  });
});

describe('the chat request, as the gateway parses it', () => {
  const base = { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }] };
  const refusal = (body: object) => {
    try {
      parseChatCompletionBody({ ...base, ...body });
    } catch (error) {
      return toApiError(error).toBody().error;
    }
    return undefined;
  };

  it.each([
    [{ frobnicate: 1 }, 'frobnicate'],
    [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio'],
    [{ modalities: ['text', 'audio'] }, 'modalities'],
    [{ prediction: { type: 'content', content: 'x' } }, 'prediction'],
    [{ web_search_options: {} }, 'web_search_options'],
    [{ functions: [{ name: 'f' }] }, 'functions'],
    [{ function_call: 'auto' }, 'function_call'],
    [{ store: true }, 'store'],
    [{ service_tier: 'flex' }, 'service_tier'],
  ])('given %j, then 400 unsupported_parameter naming %s', (body, param) => {
    expect(refusal(body)).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param });
  });

  it.each([
    [{ max_tokens: 10, max_completion_tokens: 20 }, 'max_completion_tokens'],
    [{ tools: [{ type: 'function', function: { name: 'a' } }], tool_choice: { type: 'function', function: { name: 'b' } } }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ top_logprobs: 3 }, 'top_logprobs'],
    [{ n: 9 }, 'n'],
    [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://example.com/a.png' } }] }] }, 'messages[0].content[0].image_url.url'],
    [{ messages: [{ role: 'assistant', content: null }] }, 'messages[0].content'],
  ])('given %j, then 400 invalid_parameter naming %s', (body, param) => {
    expect(refusal(body)).toMatchObject({ code: 'invalid_parameter', param });
  });

  it('accepts what OpenAI clients send: nulls for unset fields, store false, the default tier, text modality, parts and tool turns', () => {
    expect(
      refusal({
        store: false,
        service_tier: 'auto',
        modalities: ['text'],
        audio: null,
        seed: null,
        max_tokens: 5,
        max_completion_tokens: 5,
        messages: [
          { role: 'developer', content: 'Be brief.' },
          { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } }] },
          { role: 'assistant', content: null, refusal: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c', content: 'ok' },
        ],
      }),
    ).toBeUndefined();
  });
});
