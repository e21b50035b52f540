import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import type { Video } from '@oc/contracts';
import { reason } from './client';
import { CliError, type Command, type Context, fields, type List, listText, page, required, time, UsageError, usd } from './command';

const videoPath = (id: string) => `/v1/videos/${encodeURIComponent(id)}`;
/** Failed looks in a row (at the 5 s interval, over a minute) before --wait gives up. */
const MAX_POLL_FAILURES = 12;

export const VIDEO_COMMANDS: Command[] = [
  {
    usage:
      'oc videos create --prompt TEXT [--seconds 4|8|12] [--model video-2|video-2-pro] [--size WxH] [--wait [--output FILE]]',
    words: ['videos', 'create'],
    args: 0,
    options: ['prompt', 'seconds', 'model', 'size', 'wait', 'output'],
    async exec(ctx, _, values) {
      if (values.output !== undefined && !values.wait) throw new UsageError('--output needs --wait (or use oc videos download)');
      // The API requires all four; the defaults are the README's curl example, so the two create the same video.
      const video = await ctx.api.json<Video>('POST', '/v1/videos', {
        prompt: required(values.prompt, '--prompt'),
        model: values.model ?? 'video-2',
        seconds: values.seconds ?? '4',
        size: values.size ?? '1280x720',
      });
      if (!values.wait) {
        ctx.print(video, () => `Created ${video.id} (${video.status}; ${held(video)})\nFollow it: oc videos get ${video.id}`);
        return;
      }
      if (!ctx.json) ctx.io.stderr.write(`Created ${video.id} (${held(video)}); Ctrl-C stops waiting, not the video\n`);
      const done = await follow(ctx, video);
      if (done.status === 'failed') {
        ctx.print(done, () => videoText(done));
        throw new CliError(`${done.id} failed: ${done.error?.message} (${done.error?.code})`);
      }
      const file = values.output ?? `${done.id}.mp4`;
      const bytes = await download(ctx, done.id, file);
      // A completed video's capture follows its completion: its price is what it is charged.
      const paid = done['x-billing'] === 'test' ? 'not charged (test key)' : `charged ${usd(done['x-cost'].amount)}`;
      ctx.print(done, () => `${done.id} completed, ${paid}\nSaved ${file} (${size(bytes)})`);
    },
  },
  {
    usage: 'oc videos list [--limit N] [--after VIDEO_ID]',
    words: ['videos', 'list'],
    args: 0,
    options: ['limit', 'after'],
    async exec({ api, print }, _, values) {
      const list = await api.json<List<Video>>('GET', `/v1/videos${page(values)}`);
      print(list, () =>
        listText(list, 'no videos', ['ID', 'STATUS', 'PROGRESS', 'MODEL', 'SECONDS', 'SIZE', 'COST', 'CREATED', 'PROMPT'], (v) => [
          v.id,
          v.status,
          `${v.progress}%`,
          v.model,
          v.seconds,
          v.size,
          usd(v['x-cost'].amount),
          time(v.created),
          v.prompt.length > 40 ? `${v.prompt.slice(0, 39)}…` : v.prompt,
        ]),
      );
    },
  },
  {
    usage: 'oc videos get VIDEO_ID',
    words: ['videos', 'get'],
    args: 1,
    async exec({ api, print }, [id]) {
      const video = await api.json<Video>('GET', videoPath(id!));
      print(video, () => videoText(video));
    },
  },
  {
    usage: 'oc videos download VIDEO_ID [--output FILE]  (default VIDEO_ID.mp4)',
    words: ['videos', 'download'],
    args: 1,
    options: ['output'],
    async exec(ctx, [id], values) {
      const file = values.output ?? `${id}.mp4`;
      const bytes = await download(ctx, id!, file);
      ctx.print({ id, file: resolve(ctx.io.cwd, file), bytes }, () => `Saved ${file} (${size(bytes)})`);
    },
  },
  {
    usage: 'oc videos delete VIDEO_ID',
    words: ['videos', 'delete'],
    args: 1,
    async exec({ api, print }, [id]) {
      const deleted = await api.json<{ id: string }>('DELETE', videoPath(id!));
      print(deleted, () => `Deleted ${deleted.id}`);
    },
  },
];

/**
 * Looks at the video every `pollIntervalMs` until it is completed or failed. On a terminal a bar is redrawn
 * in place on stderr; piped, a plain line is written when the status or progress changes; with --json,
 * nothing (stdout stays the final JSON alone).
 */
async function follow({ api, io, json }: Context, video: Video): Promise<Video> {
  const live = !json && io.stderr.isTTY === true;
  let shown = '';
  const show = (v: Video) => {
    if (json) return;
    const line = live ? `${bar(v.progress)} ${String(v.progress).padStart(3)}%  ${v.status}` : `${v.id} ${v.status} ${v.progress}%`;
    if (line === shown) return;
    shown = line;
    // \x1b[K clears what a longer previous line left behind.
    io.stderr.write(live ? `\r${line}\x1b[K` : `${line}\n`);
  };
  show(video);
  let failures = 0;
  while (video.status === 'queued' || video.status === 'in_progress') {
    await new Promise((r) => setTimeout(r, io.pollIntervalMs));
    try {
      video = await api.json<Video>('GET', videoPath(video.id));
      failures = 0;
    } catch (error) {
      // A minutes-long wait should outlast a restart or a full rate-limit window, not a real error.
      if (!(error instanceof CliError && error.retryable) || ++failures > MAX_POLL_FAILURES) throw error;
      if (!json) io.stderr.write(`${live ? '\n' : ''}${error.message}; trying again\n`);
      shown = '';
      continue;
    }
    show(video);
  }
  if (live) io.stderr.write('\n');
  return video;
}

function bar(progress: number, width = 30): string {
  const filled = Math.round((progress / 100) * width);
  return `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
}

/** Streams the MP4 to the file; a partial file is removed, so what is left is always the whole video. */
async function download({ api, io }: Context, id: string, file: string): Promise<number> {
  const response = await api.open('GET', `${videoPath(id)}/content`, undefined, 'video/mp4');
  const path = resolve(io.cwd, file);
  let bytes = 0;
  try {
    await pipeline(
      Readable.fromWeb(response.body! as ReadableStream<Uint8Array>),
      async function* (chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          bytes += chunk.length;
          yield chunk;
        }
      },
      createWriteStream(path),
    );
  } catch (error) {
    await rm(path, { force: true });
    throw new CliError(`download of ${id} to ${path} failed: ${reason(error)}`);
  }
  return bytes;
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** What the organization pays of a video's cost, as its x-billing says. */
const BILLING: Record<Video['x-billing'], string> = {
  reserved: 'reserved',
  charged: 'charged',
  released: 'not charged (failed)',
  test: 'not charged (test key)',
};

const held = (v: Video) => (v['x-billing'] === 'test' ? BILLING.test : `${usd(v['x-cost'].amount)} reserved`);

function videoText(v: Video): string {
  const rows: [string, string][] = [
    ['id', v.id],
    ['status', `${v.status} (${v.progress}%)`],
    ['model', v.model],
    ['seconds', v.seconds],
    ['size', v.size],
    ['cost', `${usd(v['x-cost'].amount)}, ${BILLING[v['x-billing']]}`],
    ['created', time(v.created)],
    ['prompt', v.prompt],
  ];
  if (v.error) rows.push(['error', `${v.error.message} (${v.error.code})`]);
  if (v.url) rows.push(['url', v.url]);
  if (v.expires_at !== null) rows.push(['expires', `${time(v.expires_at)} unless persisted first`]);
  return fields(rows);
}
