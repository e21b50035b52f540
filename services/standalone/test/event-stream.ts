export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
}

/**
 * `GET /v1/webhooks/events/stream` as a listener reads it: `next()` is the next event (`retry:` lines and
 * comments skipped), undefined once the stream has ended, or once `waitMs` passed without one.
 */
export async function openEventStream(baseUrl: string, key: string, options: { lastEventId?: string; query?: string } = {}) {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/v1/webhooks/events/stream${options.query ?? ''}`, {
    headers: { authorization: `Bearer ${key}`, ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}) },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`event stream: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  let pending: ReturnType<typeof reader.read> | undefined;

  async function next(waitMs = 30_000): Promise<SseEvent | undefined> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const boundary = buffer.indexOf('\n\n');
      if (boundary >= 0) {
        const block = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary + 2);
        const event: SseEvent = {};
        for (const line of block.split('\n')) {
          const colon = line.indexOf(':');
          if (colon <= 0) continue;
          const field = line.slice(0, colon);
          if (field === 'id' || field === 'event' || field === 'data') event[field] = line.slice(colon + 1).replace(/^ /, '');
        }
        if (event.event || event.id) return event;
        continue;
      }
      if (ended) return undefined;
      pending ??= reader.read();
      const left = deadline - Date.now();
      const result = await Promise.race([pending, new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), Math.max(0, left)))]);
      if (result === 'waited') return undefined;
      pending = undefined;
      if (result.done) ended = true;
      else buffer += decoder.decode(result.value, { stream: true });
    }
  }

  return { res, next, close: () => abort.abort() };
}
