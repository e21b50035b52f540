import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Undefined when the file or folder is gone. The service writes under its `DATA_DIR` while a test reads it: the
 * video simulator renders clips ahead in temporary folders it removes once done, so an entry may vanish between
 * being listed and being read. What is gone was not kept.
 */
export async function ifStillThere<T>(reading: Promise<T>): Promise<T | undefined> {
  try {
    return await reading;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Every entry under `root` (its path relative to `root`, and whether it is a file), skipping folders that vanish mid-walk. */
export async function entriesUnder(root: string, under = ''): Promise<{ path: string; file: boolean }[]> {
  const entries = (await ifStillThere(readdir(join(root, under), { withFileTypes: true }))) ?? [];
  const found: { path: string; file: boolean }[] = [];
  for (const entry of entries) {
    const path = join(under, entry.name);
    found.push({ path, file: entry.isFile() });
    if (entry.isDirectory()) found.push(...(await entriesUnder(root, path)));
  }
  return found;
}
