import { type ChatCompletionChunk, VIDEO_SECONDS, type Video, type VideoPriceList } from '@oc/contracts';
import { type FormEvent, useRef, useState } from 'react';
import { Link } from 'wouter';
import { api, apiStream } from '../api';
import { usd, videoCost } from '../format';
import { ErrorNote, Loading, PageHeader, useLoad } from '../ui';

type Turn = { role: 'user' | 'assistant'; content: string };
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/**
 * A chat and a video started from the console, as the member's organization: each goes through the same route as
 * through the API (`/console/v1/chat/completions`, `/console/v1/videos`), so it is held, charged and limited alike.
 */
export function Playground() {
  const prices = useLoad(() => api<VideoPriceList>('GET', '/video-prices'), []);
  const models = useLoad(() => api<{ data: Array<{ id: string }> }>('GET', '/models'), []);
  const videoModels = new Set(prices.data?.data.map((p) => p.model));
  const chatModels = models.data?.data.map((m) => m.id).filter((id) => !videoModels.has(id));
  return (
    <>
      <PageHeader title="Playground" />
      <p className="muted">
        Try a chat or a video as your organization. Both are billed to its balance exactly as through the API, and appear in the usage and the
        ledger.
      </p>
      <ErrorNote error={models.error ?? prices.error} retry={() => Promise.all([models.reload(), prices.reload()])} />
      {(models.loading || prices.loading) && <Loading what="models" />}
      {chatModels && chatModels.length > 0 && <ChatPanel models={chatModels} />}
      {prices.data && prices.data.data.length > 0 && <VideoPanel prices={prices.data.data} />}
    </>
  );
}

function ChatPanel({ models }: { models: string[] }) {
  const [model, setModel] = useState(models[0]!);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [answer, setAnswer] = useState<string | undefined>(undefined);
  const [usage, setUsage] = useState<Usage | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const running = useRef<AbortController | undefined>(undefined);

  const send = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = event.currentTarget;
    const content = String(new FormData(form).get('message')).trim();
    if (content === '' || running.current) return;
    const asked: Turn[] = [...turns, { role: 'user', content }];
    setTurns(asked);
    setAnswer('');
    setUsage(undefined);
    setError(undefined);
    form.reset();
    const controller = new AbortController();
    running.current = controller;
    let text = '';
    try {
      await apiStream(
        '/chat/completions',
        { model, messages: asked, stream: true, stream_options: { include_usage: true } },
        (data) => {
          const chunk = data as ChatCompletionChunk;
          text += chunk.choices[0]?.delta.content ?? '';
          setAnswer(text);
          if (chunk.usage) setUsage(chunk.usage);
        },
        controller.signal,
      );
    } catch (e) {
      setError(e);
    } finally {
      running.current = undefined;
      // What was received stays in the conversation, a stopped or failed answer included.
      setTurns(text === '' ? asked : [...asked, { role: 'assistant', content: text }]);
      setAnswer(undefined);
    }
  };

  return (
    <section className="panel" aria-labelledby="playground-chat">
      <h2 id="playground-chat">Chat</h2>
      <ol className="conversation" aria-live="polite">
        {turns.map((t, i) => (
          <li key={i} className={t.role} data-role={t.role}>
            <strong>{t.role === 'user' ? 'You' : model}</strong> {t.content}
          </li>
        ))}
        {answer !== undefined && (
          <li className="assistant" data-role="assistant">
            <strong>{model}</strong> {answer || '…'}
          </li>
        )}
      </ol>
      {usage && (
        <p className="muted" data-testid="chat-usage">
          {usage.prompt_tokens} prompt and {usage.completion_tokens} completion tokens, charged to your balance.
        </p>
      )}
      <ErrorNote error={error} />
      <form onSubmit={send} className="chat-form">
        <label htmlFor="chat-model">Chat model</label>
        <select id="chat-model" value={model} onChange={(e) => setModel(e.target.value)}>
          {models.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
        <label htmlFor="chat-message">Message</label>
        <textarea id="chat-message" name="message" rows={3} maxLength={20_000} required />
        <div className="actions">
          <button type="submit" disabled={answer !== undefined}>
            Send
          </button>
          {answer !== undefined && (
            <button type="button" onClick={() => running.current?.abort()}>
              Stop
            </button>
          )}
          {answer === undefined && turns.length > 0 && (
            <button type="button" className="link" onClick={() => setTurns([])}>
              New conversation
            </button>
          )}
        </div>
      </form>
    </section>
  );
}

function VideoPanel({ prices }: { prices: VideoPriceList['data'] }) {
  const models = [...new Set(prices.map((p) => p.model))];
  const [model, setModel] = useState(models[0]!);
  const sizes = prices.filter((p) => p.model === model);
  const [size, setSize] = useState(sizes[0]!.size);
  const [seconds, setSeconds] = useState<(typeof VIDEO_SECONDS)[number]>(VIDEO_SECONDS[0]);
  const [created, setCreated] = useState<Video | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const perSecond = sizes.find((p) => p.size === size)?.per_second;
  // Whole micro-dollars, as the service prices it: 3 × 0.1 is 0.3.
  const estimate = perSecond === undefined ? undefined : (Math.round(perSecond * 1_000_000) * Number(seconds)) / 1_000_000;

  const create = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const prompt = String(new FormData(event.currentTarget).get('prompt')).trim();
    setBusy(true);
    setError(undefined);
    try {
      setCreated(await api<Video>('POST', '/videos', { model, prompt, seconds, size }));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="playground-video">
      <h2 id="playground-video">Video</h2>
      <form onSubmit={create}>
        <label htmlFor="video-model">Video model</label>
        <select
          id="video-model"
          value={model}
          onChange={(e) => {
            setModel(e.target.value);
            setSize(prices.find((p) => p.model === e.target.value)!.size);
          }}
        >
          {models.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
        <label htmlFor="video-size">Size</label>
        <select id="video-size" value={size} onChange={(e) => setSize(e.target.value as typeof size)}>
          {sizes.map((p) => (
            <option key={p.size}>{p.size}</option>
          ))}
        </select>
        <label htmlFor="video-seconds">Seconds</label>
        <select id="video-seconds" value={seconds} onChange={(e) => setSeconds(e.target.value as typeof seconds)}>
          {VIDEO_SECONDS.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
        <label htmlFor="video-prompt">Prompt</label>
        <textarea id="video-prompt" name="prompt" rows={3} minLength={10} maxLength={500} required />
        {estimate !== undefined && (
          <p data-testid="video-estimate">
            This video costs <strong>{usd(estimate)}</strong>, held from your balance when it starts and charged when it completes (nothing if it
            fails).
          </p>
        )}
        <ErrorNote error={error} />
        <div className="actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Creating…' : `Create video${estimate === undefined ? '' : ` for ${usd(estimate)}`}`}
          </button>
        </div>
      </form>
      {created && (
        <p role="status" data-testid="video-created">
          Video <span className="mono">{created.id}</span> is {created.status.replace('_', ' ')} ({videoCost(created)}). Follow it on the{' '}
          <Link href="/videos">Videos</Link> page.
        </p>
      )}
    </section>
  );
}
