/**
 * Reading a run's log (layout.ts) from its store, across attempts, in order: for the
 * CLI (`sterna logs`), the client (`runLogs`, an async iterator) and activities (the
 * last lines of an attempt, `lastLines`). No Temporal here: the caller says where the
 * log is (the run's checkpoint prefix) and, to follow, when the run has closed.
 *
 * Each node of an attempt is one byte stream; the reader keeps, per stream, how far it
 * has read and the unfinished line, so following reads each byte once. Within an
 * attempt a gang's nodes are merged by time; a single node's lines keep the agent's order.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { attemptDir, LOGS_DIR, nodeDir, parseAttemptDir, parseChunkName, parseLogLine, parseNodeDir, type LogLine } from './layout';
import type { LogStore, StoredObject } from './store';

export type LogEvent = { kind: 'attempt'; attempt: number } | ({ kind: 'line' } & LogLine);

export interface FollowOptions {
  /** True once the run has closed: the reader reads once more and ends. */
  closed(): Promise<boolean>;
  /** Between looks at the store (default 1000). */
  pollMs?: number;
  signal?: AbortSignal;
}

export interface ReadLogOptions {
  /** One attempt, or every attempt (the default). */
  attempt?: number | 'all';
  /** Only lines read by the agent at or after this time (ms since the epoch). */
  sinceMs?: number;
  /** Only the last N lines of what is there (then, following, every new one). */
  tail?: number;
  /** Keep reading new lines until the run closes. */
  follow?: FollowOptions;
}

interface Cursor {
  attempt: number;
  node: number;
  /** Bytes of the stream read so far. */
  offset: number;
  /** The last chunk read: a later listing starts there (it may have been written again, longer). */
  lastChunk?: string;
  /** Bytes after the last newline read. */
  pending: Buffer;
  lastMs: number;
}

const DEFAULT_POLL_MS = 1000;
/** How many chunks are fetched at once. */
const READ_CONCURRENCY = 8;

/** Reads a run's log: `store` is the run's checkpoint prefix's (logStoreFor(runStoragePrefix(...))). */
export class RunLogReader {
  private readonly cursors = new Map<string, Cursor>();
  private readonly logs = LOGS_DIR;

  constructor(private readonly store: LogStore) {}

  /** The attempts that have a log, ascending. */
  async attempts(): Promise<number[]> {
    return (await this.store.listDirs(this.logs)).map(parseAttemptDir).filter((a): a is number => a !== undefined).sort((a, b) => a - b);
  }

  /**
   * New lines of these attempts since the last look, in order. `final`: the streams are
   * complete, so an unfinished last line is a line.
   */
  async poll(attempts: number[], final: boolean): Promise<LogLine[]> {
    const lines: LogLine[] = [];
    for (const attempt of attempts) {
      const nodes = (await this.store.listDirs(`${this.logs}/${attemptDir(attempt)}`)).map(parseNodeDir).filter((n): n is number => n !== undefined).sort((a, b) => a - b);
      const perNode = await Promise.all(nodes.map((node) => this.readNode(attempt, node, final)));
      lines.push(...mergeByTime(perNode));
    }
    return lines;
  }

  private cursor(attempt: number, node: number): Cursor {
    const key = `${attempt}/${node}`;
    let cursor = this.cursors.get(key);
    if (!cursor) this.cursors.set(key, (cursor = { attempt, node, offset: 0, pending: Buffer.alloc(0), lastMs: 0 }));
    return cursor;
  }

  private async readNode(attempt: number, node: number, final: boolean): Promise<LogLine[]> {
    const cursor = this.cursor(attempt, node);
    const dir = `${this.logs}/${attemptDir(attempt)}/${nodeDir(node)}`;
    const chunks = (await this.store.listObjects(dir, cursor.lastChunk))
      .map((o) => ({ ...o, start: parseChunkName(o.name) }))
      .filter((o): o is StoredObject & { start: number } => o.start !== undefined && o.start + o.size > cursor.offset);
    const lines: LogLine[] = [];
    // Fetched a few at a time, consumed in order.
    for (let i = 0; i < chunks.length; i += READ_CONCURRENCY) {
      const batch = chunks.slice(i, i + READ_CONCURRENCY);
      const starts = batch.map((c, j) => (j === 0 ? Math.max(0, cursor.offset - c.start) : 0));
      const bytes = await Promise.all(batch.map((c, j) => this.store.read(dir, c.name, starts[j])));
      for (const [j, chunk] of batch.entries()) {
        let data = bytes[j];
        let from = starts[j];
        if (chunk.start + from > cursor.offset) {
          // Bytes that never reached the bucket (a chunk lost): said, not papered over.
          if (cursor.pending.length > 0) lines.push(...this.take(cursor, Buffer.from('\n')));
          lines.push(...this.take(cursor, Buffer.from(`${Math.floor(cursor.lastMs / 1000)} agent [${chunk.start + from - cursor.offset} bytes of this log are missing]\n`)));
          cursor.offset = chunk.start + from;
        } else if (chunk.start + from < cursor.offset) {
          // Read whole for a batch, but partly consumed through an earlier chunk written again longer.
          const skip = cursor.offset - chunk.start - from;
          data = data.subarray(Math.min(skip, data.length));
          from += skip;
        }
        lines.push(...this.take(cursor, data));
        cursor.offset = chunk.start + from + data.length;
        cursor.lastChunk = chunk.name;
      }
    }
    if (final && cursor.pending.length > 0) lines.push(...this.take(cursor, Buffer.from('\n')));
    return lines;
  }

  /** The complete lines of `pending + data`; what follows the last newline waits. */
  private take(cursor: Cursor, data: Buffer): LogLine[] {
    const buffer = cursor.pending.length > 0 ? Buffer.concat([cursor.pending, data]) : data;
    const lines: LogLine[] = [];
    let start = 0;
    for (let nl = buffer.indexOf(10, start); nl >= 0; nl = buffer.indexOf(10, start)) {
      const line = parseLogLine(buffer.toString('utf8', start, nl), cursor.attempt, cursor.node, cursor.lastMs);
      cursor.lastMs = line.atMs;
      lines.push(line);
      start = nl + 1;
    }
    cursor.pending = Buffer.from(buffer.subarray(start));
    return lines;
  }
}

/** Each node's lines keep their order; across nodes, the earlier line first. */
function mergeByTime(perNode: LogLine[][]): LogLine[] {
  if (perNode.length <= 1) return perNode[0] ?? [];
  const merged: LogLine[] = [];
  const at = perNode.map(() => 0);
  for (;;) {
    let best = -1;
    for (const [i, lines] of perNode.entries()) {
      if (at[i] < lines.length && (best < 0 || lines[at[i]].atMs < perNode[best][at[best]].atMs)) best = i;
    }
    if (best < 0) return merged;
    merged.push(perNode[best][at[best]++]);
  }
}

/** The lines (and an attempt marker before each attempt's first) of a run's log; see ReadLogOptions. */
export async function* readRunLog(store: LogStore, options: ReadLogOptions = {}): AsyncGenerator<LogEvent> {
  const reader = new RunLogReader(store);
  const wanted = (attempts: number[]) => (options.attempt === undefined || options.attempt === 'all' ? attempts : attempts.filter((a) => a === options.attempt));
  const keep = (line: LogLine) => options.sinceMs === undefined || line.atMs >= options.sinceMs;
  let lastAttempt: number | undefined;
  function* events(lines: LogLine[]): Generator<LogEvent> {
    for (const line of lines) {
      if (line.attempt !== lastAttempt) yield { kind: 'attempt', attempt: (lastAttempt = line.attempt) };
      yield { kind: 'line', ...line };
    }
  }

  const follow = options.follow;
  let closed = follow ? await follow.closed() : true;
  let known = wanted(await reader.attempts());
  let first = (await reader.poll(known, closed)).filter(keep);
  if (options.tail !== undefined) first = options.tail > 0 ? first.slice(-options.tail) : [];
  yield* events(first);
  while (follow && !closed && !follow.signal?.aborted) {
    await sleep(follow.pollMs ?? DEFAULT_POLL_MS, undefined, { signal: follow.signal }).catch(() => undefined);
    if (follow.signal?.aborted) return;
    // Asked before the look: once closed, this look is the last and sees every line.
    closed = await follow.closed();
    const attempts = wanted(await reader.attempts());
    // An attempt older than the latest two has ended: its lines were read already.
    const newest = attempts.length > 0 ? attempts[attempts.length - 1] : 0;
    known = attempts.filter((a) => a >= newest - 1 || !known.includes(a));
    yield* events((await reader.poll(known, closed)).filter(keep));
  }
}

/**
 * The last `n` lines of one attempt (every node, merged by time), reading its chunks
 * from the end: for a failure's message or a "last line" view. Cheap on a long log.
 */
export async function lastLines(store: LogStore, attempt: number, n: number): Promise<LogLine[]> {
  if (n <= 0) return [];
  const dir = `${LOGS_DIR}/${attemptDir(attempt)}`;
  const nodes = (await store.listDirs(dir)).map(parseNodeDir).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  const perNode = await Promise.all(
    nodes.map(async (node) => {
      const nodePath = `${dir}/${nodeDir(node)}`;
      const chunks = (await store.listObjects(nodePath)).filter((o) => parseChunkName(o.name) !== undefined);
      // Whole chunks from the last one back, until they hold more than n line ends.
      const parts: Buffer[] = [];
      let newlines = 0;
      for (let i = chunks.length - 1; i >= 0 && newlines <= n; i--) {
        const data = await store.read(nodePath, chunks[i].name, 0);
        parts.unshift(data);
        for (let at = data.indexOf(10); at >= 0; at = data.indexOf(10, at + 1)) newlines++;
        // A chunk may start mid-line: the first line read is whole only if the one before ends it.
        if (i > 0 && newlines > n) break;
      }
      const text = Buffer.concat(parts).toString('utf8').replace(/\n$/, '');
      const raw = text === '' ? [] : text.split('\n');
      const lines: LogLine[] = [];
      let lastMs = 0;
      for (const line of raw.slice(-n)) {
        const parsed = parseLogLine(line, attempt, node, lastMs);
        lastMs = parsed.atMs;
        lines.push(parsed);
      }
      return lines;
    }),
  );
  return mergeByTime(perNode).slice(-n);
}
