import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');

/**
 * End-to-end suites start the services' bundles, as `pnpm start` does: any bundle older than the sources is
 * built first (`pnpm install` builds them all, so on a fresh clone this only checks).
 */
export default function buildWhatIsStale() {
  const runnable = ['dashboard', 'standalone', 'gateway', 'billing', 'chat', 'video', 'webhook'].map((name) => `services/${name}`);
  execFileSync(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs'), ...runnable], { cwd: ROOT, stdio: 'inherit' });
}
