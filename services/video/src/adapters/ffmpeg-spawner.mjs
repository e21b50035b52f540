// Runs ffmpeg for the video service's renderer (plain JavaScript, started with `fork`, no loader).
//
// Spawning a process from the service process costs it 10-40 ms of blocked event loop each time (the
// kernel copies the page tables of a large process). This small process pays that cost instead: the
// service forks it once and sends it each ffmpeg run over IPC.
//
// IPC in:  {id, file, args, background}   background: lowest CPU priority
// IPC out: {id, error}                   error: null, or a message
// When the service disconnects (it closed, or it died), every ffmpeg still running is killed and this exits.
import { execFile } from 'node:child_process';
import { setPriority } from 'node:os';

const running = new Set();

process.on('message', ({ id, file, args, background }) => {
  const child = execFile(file, args, { maxBuffer: 1024 * 1024 }, (error, _stdout, stderr) => {
    running.delete(child);
    const message = error ? `${error.message}${stderr ? `: ${String(stderr).trim().slice(0, 2000)}` : ''}` : null;
    if (process.connected) process.send({ id, error: message });
  });
  running.add(child);
  if (background && child.pid !== undefined) {
    try {
      setPriority(child.pid, 19);
    } catch {
      // Not allowed here: it still runs, at normal priority.
    }
  }
});

process.on('disconnect', () => {
  for (const child of running) child.kill('SIGKILL');
  process.exit(0);
});
