import { type CreateResponse, DomainError, parseCreateResponse, ResponseObjectSchema, ResponseStreamEventSchema, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { conversationUpTo, responseDecider, responseTurns } from '../src/domain/response-log';
import { chatMessages, draftResponse, planChat, ResponseBuilder, responseOfItem, storedInputItems } from '../src/domain/responses';

const RESP = 'resp_abc';
const body = (over: Record<string, unknown> = {}): CreateResponse => parseCreateResponse({ model: 'chat-2', input: 'Hi there', ...over });
const usage = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
const refusal = (work: () => unknown) => {
  try {
    work();
  } catch (error) {
    if (error instanceof DomainError) return toApiError(error).toBody().error;
    return (error as { toBody(): { error: unknown } }).toBody().error;
  }
  throw new Error('expected a refusal');
};

describe('a Responses request as a chat completion', () => {
  it('sends a string input as one user message, and instructions apart (they are not kept with the turn)', () => {
    const b = body({ instructions: 'Be brief.', max_output_tokens: 50, temperature: 0.2 });
    const items = storedInputItems(RESP, b.input as string);
    expect(items).toEqual([{ type: 'message', id: 'msg_abc_i0', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'Hi there' }] }]);
    expect(planChat(b, items)).toEqual({
      messages: [{ role: 'user', content: 'Hi there' }],
      maxTokens: 50,
      temperature: 0.2,
      instructions: 'Be brief.',
      store: true,
      fields: {},
    });
  });

  it('maps message items of every role, with string or text-part content; developer is a system message', () => {
    const b = body({
      input: [
        { role: 'developer', content: 'Answer in French.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello' }, { type: 'input_text', text: 'there' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Bonjour', annotations: [] }], status: 'completed' },
        { role: 'system', content: 'Keep it short.' },
      ],
      store: false,
    });
    const items = storedInputItems(RESP, b.input as never);
    expect(items.map((i) => [i.id, i.type === 'message' && i.role])).toEqual([
      ['msg_abc_i0', 'developer'],
      ['msg_abc_i1', 'user'],
      ['msg_abc_i2', 'assistant'],
      ['msg_abc_i3', 'system'],
    ]);
    expect(items[2]).toEqual({ type: 'message', id: 'msg_abc_i2', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Bonjour', annotations: [] }] });
    expect(planChat(b, items)).toMatchObject({
      messages: [
        { role: 'system', content: 'Answer in French.' },
        { role: 'user', content: 'Hello\nthere' },
        { role: 'assistant', content: 'Bonjour' },
        { role: 'system', content: 'Keep it short.' },
      ],
      store: false,
    });
  });

  it('keeps an item a reference resolved to, with its own id, and finds the response of an id of ours', () => {
    const stored = { type: 'message' as const, id: 'msg_xyz_o0', role: 'assistant' as const, status: 'completed' as const, content: [{ type: 'output_text' as const, text: 'Earlier', annotations: [] }] };
    expect(storedInputItems(RESP, [{ type: 'resolved', item: stored }])).toEqual([stored]);
    expect(responseOfItem('msg_xyz_o0')).toBe('resp_xyz');
    expect(responseOfItem('fc_xyz_i12')).toBe('resp_xyz');
    expect(responseOfItem('msg_someone-elses')).toBeUndefined();
  });

  it('passes function tools, tool_choice and text.format on in chat terms, and tool calls and their outputs as chat messages', () => {
    const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const b = body({
      tools: [{ type: 'function', name: 'weather', description: 'Today', parameters, strict: true }],
      tool_choice: { type: 'function', name: 'weather' },
      parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
      input: [
        { role: 'user', content: 'Weather in Oslo?' },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '{"temp":3}' },
      ],
    });
    const items = storedInputItems(RESP, b.input as never);
    expect(items.slice(1)).toEqual([
      { type: 'function_call', id: 'fc_abc_i1', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' },
      { type: 'function_call_output', id: 'fco_abc_i2', call_id: 'call_1', output: '{"temp":3}', status: 'completed' },
    ]);
    expect(planChat(b, items)).toMatchObject({
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp":3}' },
      ],
      fields: {
        tools: [{ type: 'function', function: { name: 'weather', description: 'Today', parameters, strict: true } }],
        tool_choice: { type: 'function', function: { name: 'weather' } },
        parallel_tool_calls: false,
        response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } },
      },
    });
    expect(planChat(body({ text: { format: { type: 'json_object' } } }), items).fields).toEqual({ response_format: { type: 'json_object' } });
  });

  it('joins function calls to the assistant text before them', () => {
    const items = storedInputItems(RESP, [
      { type: 'message', role: 'assistant', content: 'Let me look.' },
      { type: 'function_call', call_id: 'c1', name: 'a', arguments: '{}' },
      { type: 'function_call', call_id: 'c2', name: 'b', arguments: '{}' },
    ]);
    expect(chatMessages(items)).toEqual([
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'a', arguments: '{}' } },
          { id: 'c2', type: 'function', function: { name: 'b', arguments: '{}' } },
        ],
      },
    ]);
  });

  it("gives a user message's images to chat as image parts, as an https or data: URL", () => {
    const png = 'data:image/png;base64,iVBORw0KGgo=';
    const items = storedInputItems(RESP, [
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is in these?' },
          { type: 'input_image', image_url: 'https://example.com/a.jpg', detail: 'low' },
          { type: 'input_image', image_url: png },
        ],
      },
    ]);
    expect(items[0]).toMatchObject({ role: 'user', content: [{ type: 'input_text' }, { type: 'input_image', image_url: 'https://example.com/a.jpg', detail: 'low' }, { type: 'input_image', image_url: png }] });
    expect(chatMessages(items)).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in these?' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.jpg', detail: 'low' } },
          { type: 'image_url', image_url: { url: png } },
        ],
      },
    ]);
  });

  it.each([
    ['input[0].content[0].file_id', { type: 'input_image', file_id: 'file_1' }, 'unsupported_parameter'],
    ['input[0].content[0].detail', { type: 'input_image', image_url: 'https://example.com/a.jpg', detail: 'original' }, 'unsupported_parameter'],
    ['input[0].content[0].image_url', { type: 'input_image', image_url: 'http://example.com/a.jpg' }, 'invalid_value'],
  ])('refuses an image it cannot take, naming %s', (param, part, code) => {
    expect(refusal(() => storedInputItems(RESP, [{ role: 'user', content: [part] }] as never))).toMatchObject({ code, param });
  });

  it('refuses an image outside a user message', () => {
    const input = [{ role: 'system', content: [{ type: 'input_image', image_url: 'https://example.com/a.jpg' }] }];
    expect(refusal(() => storedInputItems(RESP, input as never))).toMatchObject({ code: 'unsupported_parameter', param: 'input[0].content[0]' });
  });

  it.each([
    ['tool_choice', { tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [] } }],
    ['background', { background: true }],
    ['truncation', { truncation: 'disabled' }],
    ['service_tier', { service_tier: 'priority' }],
    ['include', { include: ['message.output_text.logprobs'] }],
    ['top_p', { top_p: 0.5 }],
    ['text.verbosity', { text: { verbosity: 'high' } }],
    ['stream_options.include_obfuscation', { stream_options: { include_obfuscation: true } }],
    ['input[0].content[1]', { input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }, { type: 'input_file', file_id: 'f' }] }] }],
    ['input[0].phase', { input: [{ role: 'assistant', content: 'x', phase: 'commentary' }] }],
  ])('refuses %s with unsupported_parameter naming it', (param, over) => {
    const b = body(over);
    expect(refusal(() => planChat(b, storedInputItems(RESP, b.input as never)))).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param });
  });

  it.each([
    ['top_p', { top_p: 1 }],
    ['truncation', { truncation: 'auto' }],
    ['service_tier', { service_tier: 'default' }],
    ['include', { include: [] }],
    ['text.format', { text: { format: { type: 'text' }, verbosity: 'medium' } }],
    ['tool_choice', { tool_choice: 'none' }],
  ])('accepts %s at the value that means what it does anyway', (_, over) => {
    const b = body(over);
    expect(() => planChat(b, storedInputItems(RESP, b.input as never))).not.toThrow();
  });

  it.each([
    ['an unknown field', { frobnicate: 1 }, 'frobnicate'],
    ['an OpenAI field not served', { prompt: { id: 'pmpt_1' } }, 'prompt'],
    ['a nested unknown field', { text: { format: { type: 'text', extra: 1 } } }, 'text.format.extra'],
    ['an item type not served', { input: [{ type: 'reasoning', summary: [] }] }, 'input[0].type'],
    ['a tool type not served', { tools: [{ type: 'web_search' }] }, 'tools[0].type'],
  ])('refuses %s at the gateway with unsupported_parameter', (_, over, param) => {
    expect(refusal(() => body(over))).toMatchObject({ code: 'unsupported_parameter', param });
  });

  it('refuses a malformed value with the usual 400 naming it', () => {
    expect(refusal(() => body({ temperature: 3 }))).toMatchObject({ code: 'invalid_parameter', param: 'temperature' });
    expect(refusal(() => parseCreateResponse({ input: 'x' }))).toMatchObject({ code: 'invalid_model', param: 'model' });
    expect(refusal(() => body({ input: [{ role: 'robot', content: 'x' }] }))).toMatchObject({ param: 'input[0].role' });
  });
});

describe('a chat answer as a Response', () => {
  const draft = draftResponse(body({ instructions: 'Be brief.', metadata: { ticket: 'T-1' }, previous_response_id: 'resp_prev' }), RESP, 1_767_225_600);

  it('drafts the response every field of the request decides', () => {
    expect(ResponseObjectSchema.parse(draft)).toEqual(draft);
    expect(draft).toMatchObject({
      id: RESP,
      object: 'response',
      status: 'in_progress',
      created_at: 1_767_225_600,
      instructions: 'Be brief.',
      metadata: { ticket: 'T-1' },
      previous_response_id: 'resp_prev',
      output: [],
      usage: null,
      store: true,
      text: { format: { type: 'text' }, verbosity: 'medium' },
    });
  });

  it('turns a whole answer into one completed message with the usage in the Responses names', () => {
    const builder = new ResponseBuilder(draft);
    builder.text('Plant early.');
    builder.finish('stop');
    const { response } = builder.complete(usage, 1_767_225_601);
    expect(ResponseObjectSchema.parse(response)).toEqual(response);
    expect(response).toMatchObject({
      status: 'completed',
      completed_at: 1_767_225_601,
      incomplete_details: null,
      output: [{ type: 'message', id: 'msg_abc_o0', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Plant early.', annotations: [] }] }],
      usage: { input_tokens: 7, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 10 },
    });
  });

  it('is incomplete, for max_output_tokens, when the length cut the answer', () => {
    const builder = new ResponseBuilder(draft);
    builder.text('Plant');
    builder.finish('length');
    const { response, events } = builder.complete(usage, 1_767_225_601);
    expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ status: 'incomplete' }] });
    expect(events.at(-1)!.type).toBe('response.incomplete');
  });

  it('streams the events of the Responses API, numbered, in order', () => {
    const builder = new ResponseBuilder(draft);
    const events = [...builder.start(), ...builder.text(''), ...builder.text('Plant'), ...builder.text(' early.')];
    builder.finish('stop');
    events.push(...builder.complete(usage, 1_767_225_601).events);
    for (const event of events) ResponseStreamEventSchema.parse(event);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(events[0]).toMatchObject({ response: { status: 'in_progress', output: [] } });
    expect(events[2]).toMatchObject({ output_index: 0, item: { id: 'msg_abc_o0', status: 'in_progress', content: [] } });
    expect(events[5]).toMatchObject({ item_id: 'msg_abc_o0', output_index: 0, content_index: 0, delta: ' early.' });
    expect(events[6]).toMatchObject({ text: 'Plant early.' });
    expect(events[9]).toMatchObject({ response: { status: 'completed', output: [{ content: [{ text: 'Plant early.' }] }], usage: { total_tokens: 10 } } });
  });

  it('streams tool calls as function_call items with their argument deltas, and no empty message', () => {
    const builder = new ResponseBuilder(draft);
    const events = [
      ...builder.start(),
      ...builder.toolCall(0, { id: 'call_1', name: 'weather', arguments: '' }),
      ...builder.toolCall(0, { arguments: '{"city":' }),
      ...builder.toolCall(0, { arguments: '"Oslo"}' }),
    ];
    builder.finish('tool_calls');
    const { events: closing, response } = builder.complete(usage, 1_767_225_601);
    events.push(...closing);
    for (const event of events) ResponseStreamEventSchema.parse(event);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[5]).toMatchObject({ item_id: 'fc_abc_o0', name: 'weather', arguments: '{"city":"Oslo"}' });
    expect(response).toMatchObject({
      status: 'completed',
      output: [{ type: 'function_call', id: 'fc_abc_o0', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' }],
    });
  });

  it('ends a stream that failed midway with response.failed, keeping what was generated', () => {
    const builder = new ResponseBuilder(draft);
    builder.start();
    builder.text('Pla');
    const events = builder.fail({ code: 'upstream_error', message: 'The provider failed.' });
    expect(events.map((e) => e.type)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.failed']);
    expect(events.at(-1)).toMatchObject({
      sequence_number: 8,
      response: { status: 'failed', error: { code: 'server_error', message: 'The provider failed.' }, output: [{ status: 'incomplete', content: [{ text: 'Pla' }] }] },
    });
  });
});

describe('responses in a chat session', () => {
  const spec = deciderSpec(responseDecider);
  const started = { type: 'ChatSessionStarted' as const, data: { session_id: 'chat_1', org_id: 'org_1', created_at: 100 } };
  const response = (id: string, previous: string | null, text: string) => {
    const builder = new ResponseBuilder({ ...draftResponse(body({ input: text }), id, 100), previous_response_id: previous });
    builder.text(`re: ${text}`);
    return builder.complete(usage, 101).response;
  };
  const recorded = (id: string, previous: string | null, text: string) => ({
    type: 'ResponseRecorded' as const,
    data: { session_id: 'chat_1', org_id: 'org_1', completion_id: `chatcmpl_${id}`, response: response(id, previous, text), input_items: storedInputItems(id, text) },
  });
  const record = (id: string, orgId = 'org_1') => ({
    type: 'RecordResponse' as const,
    sessionId: 'chat_1',
    orgId,
    completionId: `chatcmpl_${id}`,
    response: response(id, null, 'Hi'),
    inputItems: storedInputItems(id, 'Hi'),
  });

  it('records a response once in its organization’s session', () => {
    expect(spec.given([started]).when(record('resp_a'))).toEqual({ events: [recorded('resp_a', null, 'Hi')] });
    expect(spec.given([started, recorded('resp_a', null, 'Hi')]).when(record('resp_a'))).toEqual({ events: [] });
    expect(spec.given([started]).when(record('resp_a', 'org_2'))).toMatchObject({ error: expect.any(DomainError) });
  });

  it('deletes a response once; a deleted, missing or foreign one is not found', () => {
    const del = (orgId = 'org_1') => ({ type: 'DeleteResponse' as const, sessionId: 'chat_1', orgId, responseId: 'resp_a', now: 102 });
    const deleted = { type: 'ResponseDeleted' as const, data: { session_id: 'chat_1', org_id: 'org_1', response_id: 'resp_a', deleted_at: 102 } };
    expect(spec.given([started, recorded('resp_a', null, 'Hi')]).when(del())).toEqual({ events: [deleted] });
    for (const given of [[started], [started, recorded('resp_a', null, 'Hi'), deleted]]) {
      const result = spec.given(given).when(del());
      expect('error' in result && toApiError(result.error).status).toBe(404);
    }
    expect('error' in spec.given([started, recorded('resp_a', null, 'Hi')]).when(del('org_2'))).toBe(true);
  });

  it('follows a chain of responses, not the other branches of its session', () => {
    const events = [started, recorded('resp_a', null, 'one'), recorded('resp_b', 'resp_a', 'two'), recorded('resp_c', 'resp_a', 'three')];
    const turns = events.reduce(responseTurns.evolve, responseTurns.initialState());
    expect(chatMessages(conversationUpTo(turns, 'resp_c'))).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 're: one' },
      { role: 'user', content: 'three' },
      { role: 'assistant', content: 're: three' },
    ]);
  });
});
