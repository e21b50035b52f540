import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');

/**
 * Builds each runnable given (`services/standalone`, `packages/cli`) whose bundle is older than the sources,
 * as `pnpm start` does (`scripts/ensure-built.mjs`): a test of a bundle tests the sources it sits beside.
 */
export function ensureBuilt(...targets: string[]): void {
  execFileSync(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs'), ...targets], { cwd: ROOT, stdio: 'inherit' });
}

/**
 * The fields of `/proc/<pid>/stat` after the command's name (Linux): [0] the state, [1] the parent's pid, …;
 * undefined when the process is gone. The name, in parentheses, may itself hold spaces and parentheses.
 */
export async function procStat(pid: number | string): Promise<string[] | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
}
