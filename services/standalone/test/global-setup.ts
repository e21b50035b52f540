import { ensureBuilt } from './system';

/**
 * End-to-end suites start the services' bundles, as `pnpm start` does: any bundle older than the sources is
 * built first (`pnpm install` builds them all, so on a fresh clone this only checks).
 */
export default function buildWhatIsStale() {
  ensureBuilt(...['dashboard', 'standalone', 'gateway', 'billing', 'chat', 'video', 'webhook'].map((name) => `services/${name}`));
}
