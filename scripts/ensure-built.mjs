// Builds each runnable package given (e.g. `services/standalone`) whose dist/main.js is missing or older
// (and the web console, `services/dashboard`, whose dist/index.html is)
// than any TypeScript source of the workspace, so `pnpm start` always runs what the sources say.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');

function newestSource(dir, pattern = /\.(ts|mjs)$/) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path, pattern));
    else if (pattern.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The web console (a Vite app, `services/dashboard`): rebuilt into dist/ when any of its files, or the
 * contracts it takes types and constants from, is newer than its built page.
 */
function ensureConsole(dir) {
  const page = join(dir, 'dist', 'index.html');
  const inputs = [join(dir, 'src'), join(dir, 'index.html'), join(dir, 'vite.config.ts'), join(dir, 'package.json'), join(root, 'packages/contracts/src')];
  const newestInput = Math.max(...inputs.filter(existsSync).map((p) => (statSync(p).isDirectory() ? newestSource(p, /./) : statSync(p).mtimeMs)));
  if (existsSync(page) && statSync(page).mtimeMs >= newestInput) return;
  process.stderr.write(`Building ${dir.slice(root.length + 1)} …\n`);
  execFileSync(join(dir, 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'error'], { cwd: dir, stdio: 'inherit' });
}

const sources = [
  join(root, 'tsup.shared.ts'),
  ...['packages', 'services'].flatMap((group) =>
    readdirSync(join(root, group)).flatMap((name) =>
      ['src', 'package.json', 'tsup.config.ts'].map((file) => join(root, group, name, file)),
    ),
  ),
];
const newest = Math.max(
  ...sources.filter(existsSync).map((path) => (statSync(path).isDirectory() ? newestSource(path) : statSync(path).mtimeMs)),
);

for (const target of process.argv.slice(2)) {
  const dir = join(root, target);
  if (existsSync(join(dir, 'vite.config.ts'))) {
    ensureConsole(dir);
    continue;
  }
  const built = join(dir, 'dist', 'main.js');
  if (existsSync(built) && statSync(built).mtimeMs >= newest) continue;
  process.stderr.write(`Building ${target} …\n`);
  execFileSync(join(root, 'node_modules', '.bin', 'tsup'), ['--silent'], { cwd: dir, stdio: 'inherit' });
}
