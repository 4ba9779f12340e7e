/**
 * The V8 heaps of this process's worker threads, which prom-client's Node.js metrics
 * cannot see: they read only the main thread's isolate. The Temporal SDK runs every
 * workflow in a worker thread, so that is where a worker's cached runs live, and its heap
 * is what `maxCachedWorkflows` trades against (docs/workers.md).
 *
 * Read through the inspector's NodeWorker domain from the main thread: the only handle
 * Node gives on a thread someone else started, the same on Node 20 and 24. The session
 * attaches no debugger (no domain is enabled inside the threads) and asks each thread for
 * `Runtime.getHeapUsage` only when read, so a worker that is never scraped pays nothing.
 */
import { Session } from 'node:inspector/promises';

export interface ThreadHeap {
  /** Node's id of the thread (`threadId` inside it). */
  threadId: string;
  /** Bytes of V8 heap in use and reserved. */
  usedBytes: number;
  totalBytes: number;
}

/** A thread that has not answered in this long is busy; its reading is left out rather than holding a scrape. */
const ANSWER_WITHIN_MS = 2_000;

interface Attached {
  threadId: string;
  sessionId: string;
}

export class ThreadHeaps {
  private session: Session | undefined;
  private readonly attached = new Map<string, Attached>();
  private readonly waiting = new Map<number, (answer: { usedSize: number; totalSize: number } | undefined) => void>();
  private nextId = 0;

  /** Every live worker thread's heap, in thread order; those that did not answer in time are left out. */
  async read(): Promise<ThreadHeap[]> {
    await this.connect();
    const readings = await Promise.all([...this.attached.values()].map(async (thread) => {
      const usage = await this.ask(thread.sessionId);
      return usage && { threadId: thread.threadId, usedBytes: usage.usedSize, totalBytes: usage.totalSize };
    }));
    return readings.filter((r): r is ThreadHeap => r !== undefined).sort((a, b) => Number(a.threadId) - Number(b.threadId));
  }

  /** Ends the session; a later read connects again. */
  close(): void {
    this.session?.disconnect();
    this.session = undefined;
    this.attached.clear();
    for (const answer of this.waiting.values()) answer(undefined);
    this.waiting.clear();
  }

  private async connect(): Promise<void> {
    if (this.session) return;
    const session = new Session();
    session.connect();
    session.on('NodeWorker.attachedToWorker', ({ params }) => this.attached.set(params.sessionId, { threadId: threadIdOf(params.workerInfo), sessionId: params.sessionId }));
    session.on('NodeWorker.detachedFromWorker', ({ params }) => this.attached.delete(params.sessionId));
    session.on('NodeWorker.receivedMessageFromWorker', ({ params }) => {
      const message = JSON.parse(params.message) as { id?: number; result?: { usedSize: number; totalSize: number } };
      if (message.id === undefined) return;
      this.waiting.get(message.id)?.(message.result);
      this.waiting.delete(message.id);
    });
    this.session = session;
    // Attaches to the threads running now (their events arrive before the answer) and to every later one.
    await session.post('NodeWorker.enable', { waitForDebuggerOnStart: false });
  }

  private ask(sessionId: string): Promise<{ usedSize: number; totalSize: number } | undefined> {
    const session = this.session;
    if (!session) return Promise.resolve(undefined);
    const id = ++this.nextId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        resolve(undefined);
      }, ANSWER_WITHIN_MS);
      timer.unref();
      this.waiting.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      session.post('NodeWorker.sendMessageToWorker', { sessionId, message: JSON.stringify({ id, method: 'Runtime.getHeapUsage' }) }).catch(() => {
        // The thread ended between the listing and the question.
        this.waiting.delete(id);
        clearTimeout(timer);
        resolve(undefined);
      });
    });
  }
}

/**
 * The thread's `threadId`, which Node puts in the title it gives the inspector
 * ("[worker 3]", "[worker 3] name"); the inspector's own `workerId` is numbered per session.
 */
function threadIdOf(info: { workerId: string; title: string }): string {
  return /^\[worker (\d+)\]/.exec(info.title)?.[1] ?? `inspector-${info.workerId}`;
}
