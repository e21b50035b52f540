import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export const ROOT = resolve(import.meta.dirname, '..');
/** The e2e harness's preload: a child whose IPC channel closes (the bench died, even by SIGKILL) exits. */
const EXIT_WITH_PARENT = pathToFileURL(join(ROOT, 'services/standalone/test/exit-with-parent.mjs')).href;

export interface Child {
  name: string;
  process: ChildProcess;
  log: string;
}

/** Every process the bench starts, so that all of them are stopped at the end, on failure too. */
export class Processes {
  private readonly children = new Set<Child>();
  private readonly cleanups: Array<() => Promise<void>> = [];

  constructor(private readonly logDir: string) {}

  /**
   * A Node child with an IPC channel, its output appended to `<logDir>/<name>.log`. It exits when the bench
   * goes away, unless `exitWithParent` is false: a script that stops its own children when its IPC channel
   * closes (`start:distributed`) must not be made to exit before it has.
   */
  node(name: string, args: string[], env: Record<string, string> = {}, { exitWithParent = true } = {}): Child {
    const log = join(this.logDir, `${name}.log`);
    const out = openSync(log, 'a');
    const child = spawn(process.execPath, [...(exitWithParent ? ['--import', EXIT_WITH_PARENT] : []), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', out, out, 'ipc'],
      // Structured clone rather than JSON: a figure with no samples stays NaN instead of arriving as null.
      serialization: 'advanced',
    });
    closeSync(out);
    const entry = { name, process: child, log };
    this.children.add(entry);
    child.once('exit', () => this.children.delete(entry));
    return entry;
  }

  /** A TypeScript entry under the repository (the load generator, the reference servers), run through tsx. */
  tsx(name: string, entry: string, env: Record<string, string> = {}): Child {
    return this.node(name, ['--import', 'tsx', join(ROOT, entry)], env);
  }

  async stop(child: Child): Promise<void> {
    const { process: p } = child;
    if (p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    const killer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(killer);
  }

  /** Work to do once every process has stopped (a deployment's NATS stream to delete). */
  atStop(cleanup: () => Promise<void>): void {
    this.cleanups.push(cleanup);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.children].map((c) => this.stop(c)));
    for (const cleanup of this.cleanups.splice(0)) await cleanup().catch((error: unknown) => console.error(`cleanup failed: ${String(error)}`));
  }

  /**
   * Waits until the bench's own processes and theirs are nearly idle (together under a tenth of a core over
   * a quarter of a second), at most `maxMs`: a server still catching up on the last run's work
   * (subscriptions, flushes) or on its start-up work (the video simulator's ffmpeg rendering its clips
   * ahead, a child of a child) would otherwise slow the next run. Other work on the machine is not ours to wait for.
   * `only`: these processes alone (a deployment finishing what its last run left).
   */
  async quiet(maxMs: number, only?: Child[]): Promise<void> {
    const deadline = performance.now() + maxMs;
    const used = () => treeCpuTicks(only ?? [...this.children]);
    let before = await used();
    while (performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, QUIET_WINDOW_MS));
      const after = await used();
      if (after - before < (QUIET_WINDOW_MS / 1000) * CLOCK_TICKS_PER_SECOND * 0.1) return;
      before = after;
    }
  }
}

const QUIET_WINDOW_MS = 250;
/** USER_HZ, 100 on Linux everywhere this runs (`getconf CLK_TCK`). */
const CLOCK_TICKS_PER_SECOND = 100;

/** A process and its descendants, from /proc (just the process where /proc lists no children). */
async function processTree(pid: number | undefined): Promise<number[]> {
  if (pid === undefined) return [];
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    // Each thread lists the children it started (a worker thread may have spawned one).
    const threads = await readdir(`/proc/${tree[i]}/task`).catch(() => []);
    for (const thread of threads) {
      const children = await readFile(`/proc/${tree[i]}/task/${thread}/children`, 'utf8').catch(() => '');
      for (const child of children.split(' ')) if (child.trim() !== '') tree.push(Number(child));
    }
  }
  return tree;
}

/**
 * CPU time, in clock ticks, that the children and every process below them have used, from /proc: what a
 * deployment of several processes (`start:distributed`: a script, its services, their ffmpeg) costs together.
 */
export async function treeCpuTicks(children: Child[]): Promise<number> {
  let total = 0;
  for (const c of children) {
    for (const pid of await processTree(c.process.pid)) total += await cpuTicks(pid);
  }
  return total;
}

/** CPU time, in clock ticks, of processes that are not the bench's children (the host's NATS server and Redis). */
export async function pidsCpuTicks(pids: number[]): Promise<number> {
  let total = 0;
  for (const pid of pids) total += await cpuTicks(pid);
  return total;
}

/** The processes whose command is one of `names` (`nats-server`, `redis-server`), from /proc. */
export async function pidsNamed(names: string[]): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(entry)) continue;
    const command = (await readFile(`/proc/${entry}/comm`, 'utf8').catch(() => '')).trim();
    if (names.includes(command)) pids.push(Number(entry));
  }
  return pids;
}

/** Milliseconds of CPU per clock tick. */
export const MS_PER_CLOCK_TICK = 1000 / CLOCK_TICKS_PER_SECOND;

/** CPU time a process has used (user + system), in clock ticks, from /proc (0 elsewhere or once it is gone). */
async function cpuTicks(pid: number | undefined): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // Fields after the command name, which may itself hold spaces: state is the first, then utime, stime, and the
  // children's cutime and cstime from the 12th. A child that exited between two readings (each ffmpeg run of the
  // video simulator's renders lasts a second or two) is counted in its parent's cutime and cstime once reaped.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
}

export async function logTail(child: Child, lines = 30): Promise<string> {
  const text = await readFile(child.log, 'utf8').catch(() => '');
  return text.split('\n').slice(-lines).join('\n');
}

async function failed(child: Child, why: string): Promise<never> {
  throw new Error(`${child.name} ${why}; last lines of ${child.log}:\n${await logTail(child)}`);
}

/** Rejects, with the child's last log lines, if it exits: raced against waits so a crash fails them at once. */
export function exited(child: Child): Promise<never> {
  return new Promise<void>((resolve) => child.process.once('exit', () => resolve())).then(() =>
    failed(child, `exited (${child.process.signalCode ?? child.process.exitCode})`),
  );
}

/** The first IPC message a child sends that has `key` (a target's `{port}`, the load process's `{ready}`). */
export function firstMessage<T>(child: Child, key: string, timeoutMs: number): Promise<T> {
  const message = new Promise<T>((resolveMessage) => {
    const listen = (m: unknown) => {
      if (typeof m !== 'object' || m === null || !(key in m)) return;
      child.process.off('message', listen);
      resolveMessage(m as T);
    };
    child.process.on('message', listen);
  });
  const timeout = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref()).then(() =>
    failed(child, `sent no ${key} within ${timeoutMs} ms`),
  );
  return Promise.race([message, exited(child), timeout]);
}

const PROGRESS_EVERY_MS = 30_000;

/** Polls `url` until it answers 200; the milliseconds from `since` until then. Long waits say so now and then. */
export async function untilOk(child: Child, url: string, since: number, timeoutMs: number): Promise<number> {
  const poll = (async () => {
    let told = since;
    for (;;) {
      // A server that listens but is still catching up may hold the probe; give up on it and say so.
      const ok = await fetch(url, { signal: AbortSignal.timeout(5_000) }).then((r) => r.ok, () => false);
      const now = performance.now();
      if (ok) return now - since;
      if (now - since > timeoutMs) return failed(child, `did not answer 200 at ${url} within ${timeoutMs} ms`);
      if (now - told > PROGRESS_EVERY_MS) {
        told = now;
        console.log(`  ${child.name}: not ready yet after ${Math.round((now - since) / 1000)} s`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return Promise.race([poll, exited(child)]);
}

/** Resident memory in MB, from /proc (Linux only; NaN elsewhere or once the process is gone). */
export async function residentMb(pid: number | undefined): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return kb === undefined ? Number.NaN : Number(kb) / 1024;
}

/** CPU seconds (user + system) of each thread of a process, by thread id and name, from /proc (Linux only). */
export function threadCpu(pid: number): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, in clock ticks of 10 ms.
    seconds.set(`${tid} ${name}`, (Number(fields[11]) + Number(fields[12])) / 100);
  }
  return seconds;
}

/** CPU seconds of all of a process's threads. */
export const processCpu = (pid: number) => [...threadCpu(pid).values()].reduce((a, b) => a + b, 0);
