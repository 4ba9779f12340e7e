/**
 * `sterna reaper install|run|log`: the orphan reaper's Schedule, one pass by hand, and
 * what the passes deleted.
 *
 *   sterna reaper install --interval 300 --grace 600
 *   sterna reaper run --dry-run
 *   sterna reaper log --limit 10
 */
import type { Client } from '@temporalio/client';
import { type Command, InvalidArgumentError } from 'commander';
import { installReaperSchedule, reaperLog, runReaperOnce, DEFAULT_REAPER_INTERVAL_SECONDS } from '../activities/reaper';
import { DEFAULT_GRACE_SECONDS, type ReapedResource, type ReaperResult } from '../workflows/api';
import { secondsOption } from './args';

function wholeSeconds(value: string): number {
  const seconds = Number(value);
  if (!Number.isInteger(seconds) || seconds < 0) throw new InvalidArgumentError(`whole seconds, 0 or more, e.g. 600; got ${JSON.stringify(value)}`);
  return seconds;
}

function limitOption(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`a whole number of passes, at least 1; got ${JSON.stringify(value)}`);
  return n;
}

export function reapedLine(r: ReapedResource): string {
  return `${r.outcome ?? 'would delete'}  ${r.ref.backend}/${r.ref.zone}/${r.ref.name}  (${r.reason}: ${r.detail}; ${r.ageSeconds} s old)`;
}

export function passLines(result: ReaperResult): string[] {
  const listed = Object.entries(result.listed).map(([backend, n]) => `${n} on ${backend}`).join(', ') || 'no backend';
  const kept = Object.entries(result.kept).filter(([, n]) => n > 0).map(([why, n]) => `${n} ${why}`).join(', ') || 'none';
  const gone = result.gone ? `; ${result.gone} released by their runs first` : '';
  return [
    `${result.at}${result.dryRun ? ' (dry run)' : ''}: listed ${listed}; ${result.dryRun ? 'would delete' : 'deleted'} ${result.reaped.length}${gone}; kept ${kept}; grace ${result.graceSeconds} s`,
    ...result.reaped.map((r) => `  ${reapedLine(r)}`),
  ];
}

export function addReaperCommands(program: Command, connect: () => Promise<Client>): void {
  const reaper = program.command('reaper').description('delete what runs left behind: resources whose run is closed, unknown or past that attempt');

  reaper
    .command('install')
    .description('create (or update) the Temporal Schedule that runs the reaper')
    .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
    .option('--interval <seconds>', 'seconds between passes', secondsOption, DEFAULT_REAPER_INTERVAL_SECONDS)
    .option('--grace <seconds>', 'never delete a resource younger than this', wholeSeconds, DEFAULT_GRACE_SECONDS)
    .action(async (opts: { taskQueue: string; interval: number; grace: number }) => {
      const { scheduleId, created } = await installReaperSchedule(await connect(), { taskQueue: opts.taskQueue, intervalSeconds: opts.interval, graceSeconds: opts.grace });
      console.log(`${created ? 'created' : 'updated'} schedule ${scheduleId}: every ${opts.interval} s, grace ${opts.grace} s, task queue ${opts.taskQueue}`);
    });

  reaper
    .command('run')
    .description('one pass now; with --dry-run, print what it would delete and delete nothing')
    .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
    .option('--grace <seconds>', 'never delete a resource younger than this', wholeSeconds, DEFAULT_GRACE_SECONDS)
    .option('--dry-run', 'delete nothing')
    .option('--json', 'print the pass as JSON')
    .action(async (opts: { taskQueue: string; grace: number; dryRun?: boolean; json?: boolean }) => {
      const result = await runReaperOnce(await connect(), { taskQueue: opts.taskQueue, input: { graceSeconds: opts.grace, dryRun: opts.dryRun ?? false } });
      if (opts.json) return console.log(JSON.stringify(result));
      for (const line of passLines(result)) console.log(line);
    });

  reaper
    .command('log')
    .description('what recent passes deleted, newest first')
    .option('--limit <n>', 'passes to show', limitOption, 20)
    .option('--all', 'include passes that deleted nothing, and dry runs')
    .option('--json', 'print the passes as JSON lines')
    .action(async (opts: { limit: number; all?: boolean; json?: boolean }) => {
      const entries = await reaperLog(await connect(), { limit: opts.limit, all: opts.all });
      if (entries.length === 0 && !opts.json) return console.log('no reaper pass has deleted anything');
      for (const e of entries) {
        if (opts.json) console.log(JSON.stringify({ workflowId: e.workflowId, runId: e.runId, ...e.result }));
        else for (const line of passLines(e.result)) console.log(line);
      }
    });
}
