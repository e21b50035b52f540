// Preloaded into the service by `pnpm bench --soak`, which also starts it with --expose-gc; Node preloads it
// into each worker thread too. Asked over the IPC channel, every thread of the process (the services' main
// thread, the gateway's, the event store's, the projections', the tokenizer's: each its own V8 heap) runs a
// full collection and tells the heap it still uses: what the service keeps, apart from garbage not yet taken.
import { getHeapStatistics } from 'node:v8';
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';

const CHANNEL = 'oc-bench-heap-probe';
/** Workers busy with a burst of work answer late; none takes this long between two minutes of load. */
const REPLIES_WITHIN_MS = 2_000;

function collect() {
  const started = performance.now();
  globalThis.gc();
  const { used_heap_size, external_memory } = getHeapStatistics();
  return { threadId, heap: used_heap_size, external: external_memory, gcMs: performance.now() - started };
}

const channel = new BroadcastChannel(CHANNEL);
channel.unref();

if (isMainThread) {
  process.on('message', (message) => {
    if (message?.heapAfterGc !== true) return;
    const threads = [collect()];
    const listen = ({ data }) => {
      if (data?.reply) threads.push(data.reply);
    };
    channel.addEventListener('message', listen);
    channel.postMessage({ collect: true });
    setTimeout(() => {
      channel.removeEventListener('message', listen);
      process.send({ heapAfterGc: threads });
    }, REPLIES_WITHIN_MS);
  });
} else {
  channel.addEventListener('message', ({ data }) => {
    if (data?.collect) channel.postMessage({ reply: collect() });
  });
}
