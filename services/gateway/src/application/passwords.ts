import { randomBytes, scrypt, type ScryptOptions, timingSafeEqual } from 'node:crypto';

/**
 * Members' passwords, hashed with scrypt (Node's own, OpenSSL's implementation) at one of OWASP's
 * recommended settings: N = 2^15, r = 8, p = 3 (32 MiB of memory per hash, run on libuv's thread pool, so
 * the event loop never waits for it). Stored in the PHC string format so that the settings travel with
 * each hash and can be raised later without invalidating older ones.
 */
export interface PasswordSettings {
  /** log2 of scrypt's N. */
  ln: number;
  r: number;
  p: number;
}

export const DEFAULT_PASSWORD_SETTINGS: PasswordSettings = { ln: 15, r: 8, p: 3 };

const KEY_LENGTH = 32;
const SALT_BYTES = 16;

function derive(password: string, salt: Buffer, s: PasswordSettings): Promise<Buffer> {
  const options: ScryptOptions = { N: 2 ** s.ln, r: s.r, p: s.p, maxmem: 256 * 2 ** s.ln * s.r };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export async function hashPassword(password: string, settings: PasswordSettings = DEFAULT_PASSWORD_SETTINGS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, settings);
  return `$scrypt$ln=${settings.ln},r=${settings.r},p=${settings.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

/** Constant-time comparison; a hash this code cannot read never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = PHC.exec(stored);
  if (!m) return false;
  const settings = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  if (settings.ln < 10 || settings.ln > 20) return false;
  const expected = Buffer.from(m[5]!, 'base64url');
  const key = await derive(password, Buffer.from(m[4]!, 'base64url'), settings);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/**
 * Sign-in for an address that has no member still pays for one hash, so the answer's timing does not tell
 * which addresses are members.
 */
export class PasswordHasher {
  #decoy: Promise<string> | undefined;
  constructor(readonly settings: PasswordSettings = DEFAULT_PASSWORD_SETTINGS) {}
  hash(password: string) {
    return hashPassword(password, this.settings);
  }
  async verify(password: string, stored: string | undefined): Promise<boolean> {
    if (stored !== undefined) return verifyPassword(password, stored);
    this.#decoy ??= hashPassword(randomBytes(16).toString('hex'), this.settings);
    await verifyPassword(password, await this.#decoy);
    return false;
  }
}
