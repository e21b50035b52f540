import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError, type Io } from './command';

/** What `oc login` keeps: where the service is and how to authenticate to it. */
export interface Profile {
  base_url?: string;
  api_key?: string;
  admin_token?: string;
  /** What `oc webhooks listen` signs forwarded events with: made on its first run, the same ever after. */
  webhook_listen_secret?: string;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** `OC_CONFIG`, else the XDG location (`$XDG_CONFIG_HOME/oc/config.json`, `~/.config/oc/config.json`). */
export function profilePath(env: Io['env']): string {
  if (env.OC_CONFIG) return env.OC_CONFIG;
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config'), 'oc', 'config.json');
}

export async function readProfile(path: string): Promise<Profile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as Profile;
  } catch {
    throw new CliError(`${path} is not valid JSON: run oc login again, or delete it`);
  }
}

/**
 * Written to a file of its own (0600, in a 0700 directory) and renamed over the old one, so the secrets
 * are never readable by others, not even for a moment, and an interrupted write leaves the old profile.
 */
export async function saveProfile(path: string, profile: Profile): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(profile, null, 2)}\n`, { mode: 0o600 });
  // The mode given to writeFile is filtered by the umask; this one is not.
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}

export async function removeProfile(path: string): Promise<boolean> {
  const existed = await stat(path).then(
    () => true,
    () => false,
  );
  await rm(path, { force: true });
  return existed;
}

/** Enough of a secret to tell which one it is: an API key's public prefix, the last 4 characters of a token. */
export function masked(secret: string, kind: 'key' | 'token'): string {
  return kind === 'key' ? `${secret.slice(0, 12)}…` : `…${secret.slice(-4)}`;
}
