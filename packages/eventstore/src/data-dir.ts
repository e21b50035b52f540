import { chmod, mkdir } from 'node:fs/promises';

/**
 * `DATA_DIR` holds prompts and replies, ledgers, the admin token and sealed webhook secrets, so only the
 * service's own user may enter it (0700), also when it already existed with wider permissions. A process
 * entry point also sets `privateFiles()`, so that every file it creates there is 0600.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}

/** Files and directories this process creates from now on are its user's alone (umask 077). */
export function privateFiles(): void {
  process.umask(0o077);
}
