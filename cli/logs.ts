/**
 * `sterna logs RUN [--follow] [--attempt N|all] [--since TIME] [--tail N] [--json]`: what
 * the run's trainer printed (and its agent said), across attempts, in order, with a line
 * between attempts saying where each ran and how it ended (client/logs.ts).
 *
 *   ── attempt 1: us-central1-a, SPOT ──
 *   03:12:01.123 out   step 10 loss 0.41
 *   03:12:05.480 agent SIGTERM (a preemption notice, a stop or a deletion): stopping the trainer
 *   ── attempt 1 ended: preempted ──
 *   ── attempt 2: us-central1-b, SPOT ──
 */
import type { Client } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import { getStatus } from '../client';
import { runLogs, type LogEvent } from '../client/logs';
import type { RunStatus } from '../workflows/api';
import { runIdArgument } from './args';
import { timeArgument } from './cost';

function attemptArgument(value: string): number | 'all' {
  if (value === 'all') return 'all';
  if (!/^[1-9]\d{0,8}$/.test(value)) throw new InvalidArgumentError(`an attempt number (1, 2, ...) or "all"; got ${JSON.stringify(value)}`);
  return Number(value);
}

function linesArgument(value: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new InvalidArgumentError(`a number of lines, e.g. 100; got ${JSON.stringify(value)}`);
  return Number(value);
}

/** What the run says about its attempts (zone, model, outcome), when a worker answers; the log reads without it. */
class Attempts {
  private status?: RunStatus;

  constructor(
    private readonly client: Client,
    private readonly workflowId: string,
  ) {}

  async refresh(): Promise<void> {
    this.status = await getStatus(this.client, this.workflowId, { timeoutMs: 3000 }).catch(() => this.status);
  }

  line(attempt: number) {
    return this.status?.ledger.find((l) => l.attempt === attempt);
  }
}

function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

export function addLogsCommand(program: Command, connect: () => Promise<Client>): void {
  program
    .command('logs')
    .description('what the run printed: its command\'s stdout and stderr and its agent\'s lines, every attempt, in order')
    .argument('<runId>', 'the run (workflow) id', runIdArgument)
    .option('--follow', 'keep printing new lines until the run ends')
    .option('--attempt <n>', 'one attempt (1, 2, ...) or all', attemptArgument, 'all' as const)
    .option('--since <time>', 'lines printed at or after: an ISO time, or a duration ago (10m)', (v) => timeArgument(v))
    .option('--tail <n>', 'only the last n lines (then, with --follow, every new one)', linesArgument)
    .option('--json', 'one JSON object per line: {"kind":"line","attempt","node","stream","at","text"}, {"kind":"attempt",...} before each attempt and {"kind":"attempt-ended","attempt","outcome"} after one')
    .action(async (id: string, opts: { follow?: boolean; attempt: number | 'all'; since?: Date; tail?: number; json?: boolean }) => {
      const client = await connect();
      const attempts = new Attempts(client, id);
      const stop = new AbortController();
      // Ctrl-C ends a follow cleanly, with what was printed so far.
      if (opts.follow) process.once('SIGINT', () => stop.abort());
      let previous: number | undefined;
      const write = (text: string) => process.stdout.write(`${text}\n`);
      const events: AsyncIterable<LogEvent> = runLogs(client, id, { follow: opts.follow, attempt: opts.attempt, since: opts.since, tail: opts.tail, signal: stop.signal });
      for await (const event of events) {
        if (event.kind === 'line') {
          if (opts.json) write(JSON.stringify({ kind: 'line', attempt: event.attempt, node: event.node, stream: event.stream, at: new Date(event.atMs).toISOString(), text: event.text }));
          else write(`${clock(event.atMs)} ${event.node > 0 ? `n${event.node} ` : ''}${event.stream.padEnd(5)} ${event.text}`);
          continue;
        }
        // A new attempt: what the run knows of the one before (how it ended) and of this one (where).
        await attempts.refresh();
        const ended = previous === undefined ? undefined : attempts.line(previous);
        const where = attempts.line(event.attempt);
        if (opts.json) {
          if (ended) write(JSON.stringify({ kind: 'attempt-ended', attempt: ended.attempt, outcome: ended.outcome }));
          write(JSON.stringify({ kind: 'attempt', attempt: event.attempt, zone: where?.zone, provisioningModel: where?.provisioningModel }));
        } else {
          if (ended) write(`── attempt ${ended.attempt} ended: ${ended.outcome} ──`);
          write(`── attempt ${event.attempt}${where ? `: ${where.zone}, ${where.provisioningModel}` : ''} ──`);
        }
        previous = event.attempt;
      }
    });
}
