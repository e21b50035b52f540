import { parseArgs } from 'node:util';
import type { Client } from './client';

export interface Io {
  fetch: typeof globalThis.fetch;
  /** Read only by `oc login --key -` / `--token -`. */
  stdin: AsyncIterable<string | Uint8Array>;
  stdout: { write(chunk: string): unknown; isTTY?: boolean };
  stderr: { write(chunk: string): unknown; isTTY?: boolean };
  env: Record<string, string | undefined>;
  /** Where relative `--output` paths and default file names land. */
  cwd: string;
  /** Between two looks at a video being generated; the spec asks clients for no less than 5 s. */
  pollIntervalMs: number;
  /** `oc webhooks listen`: the first wait before reconnecting a lost stream (doubled each time, up to 30 s). */
  reconnectDelayMs: number;
  /** `oc webhooks listen` stops when this aborts; unset, on SIGINT or SIGTERM (Ctrl-C). */
  interrupt?: AbortSignal;
}

export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
}

export const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  limit: { type: 'string' },
  after: { type: 'string' },
  name: { type: 'string' },
  tier: { type: 'string' },
  description: { type: 'string' },
  scope: { type: 'string', multiple: true },
  'rate-limit': { type: 'string' },
  'expires-in-days': { type: 'string' },
  test: { type: 'boolean' },
  'requests-per-minute': { type: 'string' },
  'requests-per-day': { type: 'string' },
  'chat-requests-per-minute': { type: 'string' },
  'chat-tokens-per-day': { type: 'string' },
  key: { type: 'string' },
  prompt: { type: 'string' },
  model: { type: 'string' },
  seconds: { type: 'string' },
  size: { type: 'string' },
  wait: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  session: { type: 'string' },
  'max-tokens': { type: 'string' },
  days: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  'forward-to': { type: 'string' },
  events: { type: 'string' },
  'print-secret': { type: 'boolean' },
} as const;

export const parse = (args: string[]) => parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
export type Values = ReturnType<typeof parse>['values'];
export type Print = (body: unknown, human: () => string) => void;

export interface Context {
  io: Io;
  json: boolean;
  print: Print;
  /** `/admin/v1` with the admin token. */
  admin: Client;
  /** `/v1` with the API key; its calls fail when none is configured. */
  api: Client;
}

export interface Command {
  usage: string;
  words: string[];
  args: number;
  options?: (keyof typeof OPTIONS)[];
  exec(ctx: Context, args: string[], values: Values): Promise<void>;
}

/** Bad invocation: exit code 2 with the usage. */
export class UsageError extends Error {}
/** The call failed (API error, unreachable service, a failed video): exit code 1. */
export class CliError extends Error {
  /** The spec's retryable failures (429, 500, 503) and an unreachable service: worth asking again later. */
  constructor(
    message: string,
    readonly retryable = false,
  ) {
    super(message);
  }
}

export function required(value: string | undefined, option: string): string {
  if (!value) throw new UsageError(`${option} is required`);
  return value;
}

export function integer(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${option} must be a whole number, got "${value}"`);
  return Number(value);
}

export function page(values: Values): string {
  const query = new URLSearchParams();
  const limit = integer(values.limit, '--limit');
  if (limit !== undefined) query.set('limit', String(limit));
  if (values.after) query.set('after', values.after);
  const text = query.toString();
  return text ? `?${text}` : '';
}

export function time(unixSeconds: number | null): string {
  return unixSeconds === null ? '-' : new Date(unixSeconds * 1000).toISOString().replace('.000Z', 'Z');
}

/** Up to 6 decimals so micro-dollar charges stay visible, at least 2 so dollars read as dollars. */
export function usd(amount: number): string {
  return `${amount < 0 ? '-' : ''}$${Math.abs(amount).toFixed(6).replace(/0{1,4}$/, '')}`;
}

export function fields(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
}

export function listText<T extends { id: string }>(list: List<T>, empty: string, header: string[], row: (item: T) => string[]): string {
  if (list.data.length === 0) return empty;
  const rows = [header, ...list.data.map(row)];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
  if (list.has_more) lines.push(`(more: --after ${list.data.at(-1)!.id})`);
  return lines.join('\n');
}
