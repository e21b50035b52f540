import { readdir, readFile } from 'node:fs/promises';
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

/** Every file under `root` with what it holds, leaving out those that vanish before they are read. */
export async function filesUnder(root: string): Promise<{ path: string; bytes: Buffer }[]> {
  const files = (await entriesUnder(root)).filter((entry) => entry.file);
  const read = await Promise.all(files.map(async ({ path }) => ({ path, bytes: await ifStillThere(readFile(join(root, path))) })));
  return read.flatMap(({ path, bytes }) => (bytes ? [{ path, bytes }] : []));
}
