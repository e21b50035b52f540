import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The operator token: ADMIN_TOKEN if set, otherwise one generated on first start and kept in DATA_DIR. */
export async function resolveAdminToken(dataDir: string, configured: string | undefined) {
  if (configured) return { token: configured, generated: false };
  const file = join(dataDir, 'admin-token');
  try {
    return { token: (await readFile(file, 'utf8')).trim(), generated: false, file };
  } catch {
    const token = `oc_admin_${randomBytes(32).toString('base64url')}`;
    await mkdir(dataDir, { recursive: true });
    await writeFile(file, `${token}\n`, { mode: 0o600 });
    return { token, generated: true, file };
  }
}
