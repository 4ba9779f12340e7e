/**
 * The workflow threads' heaps in the worker's metrics: prom-client sees only the main
 * thread's isolate, and the cached runs live in another. A real worker thread holding a
 * known amount is read through the registry as a scrape reads it.
 */
import { strict as assert } from 'node:assert';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { registerThreadHeaps } from '../../activities/metrics/registry';
import { ThreadHeaps } from '../../activities/metrics/thread-heaps';

const MB = 2 ** 20;

/** A thread that keeps `mb` MB of small objects alive, as a cache of runs would. */
async function holdingThread(mb: number): Promise<Worker> {
  const thread = new Worker(
    `const { parentPort } = require('node:worker_threads');
     const kept = [];
     // Arrays of doubles: 8 bytes an element in the thread's own heap, whatever V8 does with strings.
     for (let i = 0; i < ${mb}; i++) kept.push(new Array(128 * 1024).fill(i + 0.5));
     parentPort.postMessage('holding');
     parentPort.on('message', () => kept.length);`,
    { eval: true },
  );
  await once(thread, 'message');
  return thread;
}

async function threadGauge(registry: Registry, name: string, threadId: number): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)!.get()).values;
  return values.find((v) => v.labels.thread === String(threadId))?.value;
}

describe("the workflow threads' heaps in the metrics", function () {
  this.timeout(30_000);
  const heaps = new ThreadHeaps();
  let thread: Worker | undefined;
  let small: Worker | undefined;
  afterEach(async () => {
    await thread?.terminate();
    await small?.terminate();
    heaps.close();
  });

  it("reports each worker thread's V8 heap by thread id, apart from the main thread's", async () => {
    thread = await holdingThread(40);
    small = await holdingThread(1);
    const registry = new Registry();
    registerThreadHeaps(registry, heaps);
    const used = await threadGauge(registry, 'sterna_thread_heap_used_bytes', thread.threadId);
    const total = await threadGauge(registry, 'sterna_thread_heap_total_bytes', thread.threadId);
    const smallUsed = await threadGauge(registry, 'sterna_thread_heap_used_bytes', small.threadId);
    assert.ok(used !== undefined && total !== undefined && smallUsed !== undefined, 'both threads are reported');
    // The 39 MB more that one thread holds are in its own reading, and in no other.
    assert.ok(used - smallUsed >= 35 * MB && used - smallUsed < 60 * MB, `${used / MB} MB against ${smallUsed / MB} MB`);
    assert.ok(total >= used, `reserved ${total / MB} MB >= used ${used / MB} MB`);
  });

  it('forgets a thread once it has ended', async () => {
    thread = await holdingThread(1);
    const threadId = thread.threadId;
    assert.ok((await heaps.read()).some((h) => h.threadId === String(threadId)));
    await thread.terminate();
    thread = undefined;
    assert.ok(!(await heaps.read()).some((h) => h.threadId === String(threadId)));
  });
});
