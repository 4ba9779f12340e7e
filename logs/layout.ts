/**
 * Where a run's log lives in its bucket, and what its lines look like: the contract
 * between the agent that writes it (activities/agent/sterna-agent.sh, "logs") and the
 * readers here. No I/O.
 *
 *   <checkpoint URI>/<runKey>/logs/attempt-<N, 6 digits>/node-<rank>/<offset, 16 digits>.log
 *
 * Each node of each attempt writes one byte stream (its spool), shipped in chunks; a
 * chunk's name is the stream offset of its first byte, so names sort in stream order
 * and chunks follow one another byte for byte. A chunk may end inside a line (the next
 * one carries the rest), and one whose upload was retried may be written again, longer,
 * under the same name. Each line of the stream is
 *
 *   <unix seconds>[.<fraction>] <stream> <text>
 *
 * where stream is `out` or `err` (the command's stdout / stderr), `agent` (the agent's
 * own log), or another lowercase name (setup's).
 */
import { runKey } from '../workflows/api';

/** The agent's own lines: what it did and why it stopped (a preemption notice...). */
export const AGENT_STREAM = 'agent';

/**
 * The run's checkpoint prefix, as the run gives it to its agent (workflows/run/requests.ts
 * `provisionRequest`: agent.checkpointUri; test/stack/logs.test.ts holds the two equal).
 */
export function runStoragePrefix(checkpointUri: string, workflowId: string): string {
  return `${checkpointUri.replace(/\/+$/, '')}/${runKey(workflowId)}`;
}

/** The run's log: this directory under its checkpoint prefix. */
export const LOGS_DIR = 'logs';

export function attemptDir(attempt: number): string {
  return `attempt-${String(attempt).padStart(6, '0')}`;
}

export function nodeDir(rank: number): string {
  return `node-${rank}`;
}

export function chunkName(offset: number): string {
  return `${String(offset).padStart(16, '0')}.log`;
}

/** `attempt-000003` -> 3; anything else (a stray object) -> undefined. */
export function parseAttemptDir(name: string): number | undefined {
  const match = /^attempt-(\d{1,9})$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

export function parseNodeDir(name: string): number | undefined {
  const match = /^node-(\d{1,3})$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

/** `0000000000001234.log` -> 1234; a partial upload (`.part`) or a stray object -> undefined. */
export function parseChunkName(name: string): number | undefined {
  const match = /^(\d{16})\.log$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

export interface LogLine {
  attempt: number;
  /** The gang node's rank (0 for a single node). */
  node: number;
  /** out, err, agent (or setup's stream). */
  stream: string;
  /** When the agent read the line, ms since the epoch. */
  atMs: number;
  text: string;
}

const LINE = /^(\d{1,12})(?:[.,](\d{1,9}))? ([a-z][a-z0-9-]{0,31}) (.*)$/s;

/**
 * One line of a node's stream (without its newline). A line that does not have the
 * agent's shape (a stream damaged on disk) is kept as it is, with `atMs` from the line
 * before it (`previousMs`), so no text is ever dropped.
 */
export function parseLogLine(raw: string, attempt: number, node: number, previousMs: number): LogLine {
  const match = LINE.exec(raw);
  if (!match) return { attempt, node, stream: 'unknown', atMs: previousMs, text: raw };
  const fraction = (match[2] ?? '').padEnd(3, '0').slice(0, 3);
  return { attempt, node, stream: match[3], atMs: Number(match[1]) * 1000 + Number(fraction), text: match[4] };
}
