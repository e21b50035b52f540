import { type ChatCompletion, type ChatCompletionChunk, type ChatSession, contentText, type StoredChatMessage, type Usage } from '@oc/contracts';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { reason } from './client';
import { CliError, type Command, integer, type List, listText, page, time } from './command';

export const CHAT_COMMANDS: Command[] = [
  {
    usage: 'oc chat MESSAGE [--session CHAT_ID] [--model chat-2] [--max-tokens N]  (streams the answer; --json waits for it whole)',
    words: ['chat'],
    args: 1,
    options: ['session', 'model', 'max-tokens'],
    async exec({ api, io, json, print }, [message], values) {
      const request = {
        model: values.model ?? 'chat-2',
        messages: [{ role: 'user', content: message }],
        session_id: values.session,
        max_tokens: integer(values['max-tokens'], '--max-tokens'),
      };
      if (json) {
        const completion = await api.json<ChatCompletion>('POST', '/v1/chat/completions', request);
        print(completion, () => completion.choices[0]?.message.content ?? '');
        return;
      }
      const response = await api.open(
        'POST',
        '/v1/chat/completions',
        { ...request, stream: true, stream_options: { include_usage: true } },
        'text/event-stream',
      );
      let session: string | undefined;
      let usage: Usage | null | undefined;
      let ended = false;
      let failure: { message: string; code: string } | undefined;
      const parser = createParser({
        onEvent({ data }: EventSourceMessage) {
          if (data === '[DONE]') {
            ended = true;
            return;
          }
          // A failure after the stream began (upstream error, stall) comes as one last event with the error body.
          const chunk = JSON.parse(data) as ChatCompletionChunk & { error?: { message: string; code: string } };
          if (chunk.error) {
            failure = chunk.error;
            return;
          }
          session = chunk.session_id;
          usage = chunk.usage ?? usage;
          const text = chunk.choices[0]?.delta.content;
          if (text) io.stdout.write(text);
        },
      });
      const decoder = new TextDecoder();
      try {
        for await (const bytes of response.body!) parser.feed(decoder.decode(bytes, { stream: true }));
      } catch (error) {
        io.stdout.write('\n');
        throw new CliError(`the stream broke: ${reason(error)}`);
      }
      io.stdout.write('\n');
      if (failure) throw new CliError(`${failure.message} (${failure.code})`);
      if (!ended) throw new CliError('the stream ended before the answer was complete');
      // On stderr, so that `oc chat … > answer.txt` keeps the answer alone.
      io.stderr.write(`[${session}${usage ? `, ${usage.total_tokens} tokens` : ''}; continue with --session ${session}]\n`);
    },
  },
  {
    usage: 'oc sessions list [--limit N] [--after CHAT_ID]',
    words: ['sessions', 'list'],
    args: 0,
    options: ['limit', 'after'],
    async exec({ api, print }, _, values) {
      const list = await api.json<List<{ id: string; created_at: number }>>('GET', `/v1/chat/completions${page(values)}`);
      print(list, () => listText(list, 'no chat sessions', ['ID', 'CREATED'], (s) => [s.id, time(s.created_at)]));
    },
  },
  {
    usage: 'oc sessions show CHAT_ID',
    words: ['sessions', 'show'],
    args: 1,
    async exec({ api, print }, [id]) {
      const session = await api.json<ChatSession>('GET', `/v1/chat/completions/${encodeURIComponent(id!)}`);
      print(session, () =>
        [`${session.id}, started ${time(session.created_at)}`, ...session.messages.map((m) => `\n${m.role} (${time(m.created_at)}):\n${transcriptText(m)}`)].join(
          '\n',
        ),
      );
    },
  },
];

/** A stored message as text: its text parts, images as `[image]`, tool calls as `name(arguments)`. */
function transcriptText(m: StoredChatMessage): string {
  const parts = Array.isArray(m.content) ? m.content.map((p) => (p.type === 'text' ? p.text : '[image]')).join('') : contentText(m.content);
  const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
  return [m.tool_call_id ? `[result of ${m.tool_call_id}] ${parts}` : parts, ...calls].filter((t) => t !== '').join('\n');
}
