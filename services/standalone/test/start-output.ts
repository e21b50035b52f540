import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { expect, vi } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');

/**
 * `pnpm start`'s built bundle, run with these variables (and none of the test's NODE_ENV) on `dataDir` until it
 * has printed its first lines, `whileRunning` given them; then stopped. What it printed.
 */
export async function startOutput(dataDir: string, env: Record<string, string>, whileRunning?: (output: string) => Promise<void>): Promise<string> {
  const { NODE_ENV: _inherited, ...rest } = process.env;
  const child = spawn(process.execPath, [join(ROOT, 'services/standalone/dist/main.js')], {
    cwd: ROOT,
    env: { ...rest, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk));
  try {
    // The lines are written at once, the web console's among them.
    await vi.waitFor(() => expect(output).toMatch(/^Web console: .*$/m), { timeout: 60_000, interval: 50 });
    await whileRunning?.(output);
  } finally {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }
  return output;
}
