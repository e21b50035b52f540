// Builds each runnable package given (e.g. `services/standalone`) whose dist/main.js is missing or older
// than any TypeScript source of the workspace, so `pnpm start` always runs what the sources say.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (/\.(ts|mjs)$/.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
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
  const built = join(dir, 'dist', 'main.js');
  if (existsSync(built) && statSync(built).mtimeMs >= newest) continue;
  process.stderr.write(`Building ${target} …\n`);
  execFileSync(join(root, 'node_modules', '.bin', 'tsup'), ['--silent'], { cwd: dir, stdio: 'inherit' });
}
