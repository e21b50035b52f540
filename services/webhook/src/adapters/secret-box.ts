import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** WEBHOOK_SECRET_KEY's bytes: hex when it is 64 hex digits, base64 otherwise. */
export const secretKeyBytes = (value: string) =>
  /^[0-9a-f]{64}$/i.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');

/** Whether WEBHOOK_SECRET_KEY is 32 bytes in base64 (44 characters) or hex (64 digits). */
export const isSecretKey = (value: string) =>
  /^[0-9a-f]{64}$/i.test(value) || (/^[A-Za-z0-9+/]{43}=$/.test(value) && secretKeyBytes(value).length === 32);

/**
 * Webhook secrets at rest: AES-256-GCM under a key from configuration, as `v1.<iv>.<tag>.<ciphertext>`
 * (base64url). Events and read models only ever hold this form; the plaintext exists while signing.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('The webhook secret key must be 32 bytes');
    this.key = key;
  }

  /** The key as configured: 32 bytes in base64 (44 characters) or hex (64). */
  static fromConfig(value: string): SecretBox {
    return new SecretBox(secretKeyBytes(value));
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  open(sealed: string): string {
    const [version, iv, tag, ciphertext] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error('Not a sealed webhook secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }
}

/** WEBHOOK_SECRET_KEY if set, otherwise a key generated on first start and kept (0600) in `file`. */
export async function resolveSecretKey(file: string, configured: string | undefined): Promise<string> {
  if (configured) return configured;
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const key = randomBytes(32).toString('base64');
    await mkdir(dirname(file), { recursive: true });
    // Written whole aside, then linked into place: the name never shows a half-written key, and of two
    // replicas starting on one directory, exactly one key wins and both seal with it.
    const aside = `${file}.${randomBytes(6).toString('hex')}`;
    await writeFile(aside, `${key}\n`, { mode: 0o600, flag: 'wx' });
    try {
      await link(aside, file);
      return key;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      return (await readFile(file, 'utf8')).trim();
    } finally {
      await rm(aside, { force: true });
    }
  }
}
