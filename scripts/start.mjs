// `pnpm start`: builds what is out of date (ensure-built.mjs), then runs the standalone service in a process of
// its own with the flags and, on Linux, the allocator setting it is measured with. glibc reads MALLOC_ARENA_MAX
// only when a process starts, and a shell's `VAR=value command` is not portable to Windows, hence this launcher.
import { execFileSync, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
// A 1 GB heap budget and one V8 platform thread (docs/decisions.md); the bench reads this line to run the same.
const NODE_FLAGS = ['--enable-source-maps', '--max-old-space-size=1024', '--v8-pool-size=1'];
execFileSync(process.execPath, [join(root, 'scripts/ensure-built.mjs'), 'services/dashboard', 'services/standalone'], { stdio: 'inherit' });

// Two arenas instead of up to eight per core keep RSS about 40 MB lower under sustained load at the same
// rate (docs/reliability.md, Memory); a value of the caller's own wins.
const env = process.platform === 'linux' ? { MALLOC_ARENA_MAX: '2', ...process.env } : process.env;
const child = spawn(
  process.execPath,
  [...NODE_FLAGS, join(root, 'services/standalone/dist/main.js'), ...process.argv.slice(2)],
  { stdio: 'inherit', env },
);
// Ctrl-C in a terminal reaches the service itself (one foreground process group), which then drains: this
// process only waits for it. A SIGTERM sent to this process alone is passed on.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => child.kill('SIGTERM'));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
