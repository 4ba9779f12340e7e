#!/usr/bin/env node
/**
 * The `sterna` command: start, follow, change and cancel training runs.
 *
 *   sterna validate examples/run.json
 *   sterna start examples/run.json --id my-run --follow
 *   sterna status my-run | sterna budget my-run 20 | sterna cancel my-run | sterna list
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { cancel, getStatus, InvalidSpecError, listRuns, result, setBudget, setDeadline, startTrainingRun } from '../client';
import { searchAttributeCreateCommands } from '../workflows/search-attributes';
import { checkSpec } from '../workflows/spec';
import { connectClient } from './connect';
import { progressLine, summaryLines, usd } from './format';

function readSpec(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read run spec ${path}: ${(err as Error).message}`);
  }
}

async function follow(workflowId: string): Promise<void> {
  const client = await connectClient();
  const done = result(client, workflowId);
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => undefined);
  while (!finished) {
    try {
      process.stdout.write(`\r${progressLine(await getStatus(client, workflowId))}`);
    } catch {
      /* the run may be between workers */
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  process.stdout.write('\n');
  for (const line of summaryLines(await done)) console.log(line);
}

const program = new Command('sterna').description('Run GPU training on cheap preemptible capacity, as Temporal workflows.');

program
  .command('validate <spec>')
  .description('check a run spec without starting anything')
  .action((path: string) => {
    const check = checkSpec(readSpec(path));
    if (check.ok) return console.log(`${path}: valid`);
    for (const p of check.problems) console.error(`${path}: ${p.path}: ${p.message}`);
    process.exitCode = 2;
  });

program
  .command('start <spec>')
  .description('start a training run from a JSON spec')
  .option('--id <workflowId>', 'workflow id (the run id); generated when omitted')
  .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
  .option('--follow', 'show live progress until the run ends')
  .action(async (path: string, opts: { id?: string; taskQueue: string; follow?: boolean }) => {
    const client = await connectClient();
    const handle = await startTrainingRun(client, readSpec(path) as never, { workflowId: opts.id, taskQueue: opts.taskQueue });
    console.log(`started ${handle.workflowId}`);
    if (opts.follow) await follow(handle.workflowId);
  });

program
  .command('status <runId>')
  .option('--json', 'print the whole status as JSON')
  .action(async (id: string, opts: { json?: boolean }) => {
    const status = await getStatus(await connectClient(), id);
    if (opts.json) return console.log(JSON.stringify(status, null, 2));
    console.log(progressLine(status));
    for (const e of status.timeline.slice(-10)) console.log(`  ${e.at}  ${e.event}`);
  });

program.command('follow <runId>').description('live progress until the run ends').action(follow);

program
  .command('budget <runId> <usd>')
  .description('raise or lower the run budget')
  .action(async (id: string, amount: string) => console.log(progressLine(await setBudget(await connectClient(), id, Number(amount)))));

program
  .command('deadline <runId> <iso>')
  .description('move the run deadline')
  .action(async (id: string, at: string) => console.log(progressLine(await setDeadline(await connectClient(), id, at))));

program
  .command('cancel <runId>')
  .description('cancel a run; its resources are released first')
  .action(async (id: string) => {
    await cancel(await connectClient(), id);
    console.log(`cancellation requested for ${id}`);
  });

program
  .command('list')
  .option('--query <visibilityQuery>', 'e.g. \'SternaTeam = "ml-platform"\'')
  .action(async (opts: { query?: string }) => {
    for (const r of await listRuns(await connectClient(), opts.query)) {
      console.log(`${r.workflowId.padEnd(40)} ${r.status.padEnd(12)} ${(r.phase ?? '').padEnd(16)} ${(r.zone ?? '').padEnd(18)} ${r.costUsd !== undefined ? usd(r.costUsd) : ''}`);
    }
  });

program
  .command('search-attributes')
  .description('print the commands that register Sterna\'s search attributes on a namespace')
  .option('--namespace <namespace>', 'the namespace', '<namespace>')
  .action((opts: { namespace: string }) => console.log(searchAttributeCreateCommands(opts.namespace).join('\n')));

program.parseAsync().catch((err: Error) => {
  console.error(err instanceof InvalidSpecError ? err.message : `sterna: ${err.message}`);
  process.exit(err instanceof InvalidSpecError ? 2 : 1);
});
