import { existsSync } from 'node:fs';

/** Debian's Chromium (`apt-get install -y chromium`); playwright-core drives it, never a browser of its own. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Whether Chromium is installed. Without it the browser suite skips, unless the run says REQUIRE_CHROMIUM=1
 * (CI does, after installing it), in which case a missing browser fails the run instead.
 */
export function chromiumInstalled(): boolean {
  const found = existsSync(CHROMIUM);
  if (!found && process.env.REQUIRE_CHROMIUM === '1') {
    throw new Error(`REQUIRE_CHROMIUM=1 but no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
  }
  return found;
}

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];
