export interface SseEvent {
  raw: string;
  json?: any;
}

/** Reads a whole Server-Sent Events body into its `data:` payloads (`[DONE]` kept raw). */
export async function readSse(res: Response): Promise<SseEvent[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const raw = block
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n');
      return raw === '[DONE]' ? { raw } : { raw, json: JSON.parse(raw) };
    });
}
