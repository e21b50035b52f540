import { copyFile, link, mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { FileStore } from '../application/ports';

/** Files under one directory; keys are relative paths the service builds from ids. */
export class LocalFileStore implements FileStore {
  private readonly root: string;
  /** Directories known to exist, so that a put does not ask again every time. */
  private readonly directories = new Set<string>();

  constructor(root: string) {
    this.root = resolve(root);
  }

  private path(key: string): string {
    const path = resolve(join(this.root, key));
    if (!path.startsWith(this.root + sep)) throw new Error(`Key escapes the store: ${key}`);
    return path;
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    const path = this.path(key);
    await mkdir(dirname(path), { recursive: true });
    // Written aside then renamed, so a reader never sees half a file. A partial name left by a crash may be
    // a link to a file of `putFile`'s caller: dropped first, never written through.
    await rm(`${path}.partial`, { force: true });
    await writeFile(`${path}.partial`, bytes);
    await rename(`${path}.partial`, path);
  }

  /**
   * A hard link to `source` where the file system allows (same device, link count not exhausted), a copy
   * otherwise. A link appears complete at once; a copy, or a link replacing an existing file, is made aside
   * and renamed into place. The caller never modifies `source` again, and neither does this store: `put`
   * and `remove` replace or drop the name, never the content.
   */
  async putFile(key: string, source: string): Promise<void> {
    const path = this.path(key);
    try {
      await this.inDirectory(path, () => link(source, path));
      return;
    } catch {
      // Exists already (a step repeated after a crash), another device, too many links: aside, then rename.
    }
    const partial = `${path}.partial`;
    await rm(partial, { force: true });
    try {
      await link(source, partial);
    } catch {
      await copyFile(source, partial);
    }
    await rename(partial, path);
  }

  /** Runs `write` of a file at `path`, creating its directory when it is missing (once per directory, usually). */
  private async inDirectory(path: string, write: () => Promise<void>): Promise<void> {
    const dir = dirname(path);
    if (!this.directories.has(dir)) {
      await mkdir(dir, { recursive: true });
      this.directories.add(dir);
    }
    try {
      await write();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // The directory was removed behind our back (or the source is missing, which fails again below).
      await mkdir(dir, { recursive: true });
      await write();
    }
  }

  async size(key: string): Promise<number | null> {
    try {
      return (await stat(this.path(key))).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async read(key: string, offset: number, length: number): Promise<Buffer> {
    const file = await open(this.path(key), 'r');
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await file.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    } finally {
      await file.close();
    }
  }

  async remove(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }
}
