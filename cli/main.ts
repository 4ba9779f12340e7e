#!/usr/bin/env node
/**
 * The `sterna` command: start, follow, change and cancel training runs.
 *
 *   sterna validate examples/run.json
 *   sterna check examples/run.json [--json]      (credentials, quotas, buckets... before paying)
 *   sterna start examples/run.json --id my-run --follow [--workdir DIR]
 *   sterna logs my-run [--follow] [--attempt N|all] [--since 10m] [--tail 100] [--json]
 *   sterna watch my-run [--json] | sterna status my-run | sterna budget my-run 20 | sterna cancel my-run | sterna list
 *   sterna reaper install | sterna reaper run --dry-run | sterna reaper log
 *   sterna team set ml --budget 500 --period week --max-gpus 8 | sterna team show ml
 *   sterna cost --by team --since 7d [--json|--csv]
 *   sterna zones [--json]
 *   sterna plan examples/run.json
 *   sterna deploy status [--json] | sterna deploy promote BUILD_ID
 *   sterna whoami [--json]                       (the namespace and identity all of these act as)
 *
 * Every failure prints its cause and how to fix it on stderr, and exits 2 when the
 * input was wrong, 1 otherwise (cli/report.ts).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Client } from '@temporalio/client';
import { Command, CommanderError } from 'commander';
import { cancel, cancelRequestOf, getStatus, listRuns, result, setBudget, setDeadline, startTrainingRun, type StartSpec } from '../client';
import { DEFAULT_MAX_WORKDIR_BYTES, listWorkdir, WorkdirProblemError } from '../client/workdir';
import { sizeText } from '../client/workdir';
import { connectFromEnvironment } from '../client/connect';
import { ClientErrorKind, SternaClientError } from '../client/errors';
import { checkSpec, type RunSpec, type RunSpecInput, searchAttributeCreateCommands, specWarnings } from '../workflows/api';
import { addKeyToFile, defaultKeyFile } from '../codec/keys';
import { deadlineArgument, megabytesOption, runIdArgument, secondsOption, usdArgument } from './args';
import { changedByLines, keptLines, lastLineLines, nodesLines, pricesLines, progressLine, summaryLines, usd } from './format';
import { ProgressDisplay } from './progress';
import { addPlanCommand } from './plan';
import { addCheckCommand } from './check';
import { addReaperCommands } from './reaper';
import { addCostCommand } from './cost';
import { addTeamCommands } from './team';
import { addZonesCommand } from './zones';
import { addLogsCommand } from './logs';
import { addDeployCommands } from './deploy';
import { addWhoamiCommand } from './whoami';
import { ExitCode, reportFailure } from './report';

let connected: Client | undefined;
async function connect(): Promise<Client> {
  connected ??= await connectFromEnvironment();
  return connected;
}

/** The spec as written: its `workdir` may be a local directory, relative to the spec file. */
function readStartSpec(path: string): StartSpec {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as StartSpec;
  } catch (err) {
    throw new SternaClientError(ClientErrorKind.InvalidArgument, `cannot read run spec ${path}: ${(err as Error).message}`, 'pass the path of a JSON run spec, e.g. examples/run.json');
  }
}

/** For what needs no workdir (plan, check): a local workdir is left out rather than refused. */
function readSpec(path: string): RunSpecInput {
  const spec = readStartSpec(path);
  return typeof spec.workdir === 'string' ? { ...spec, workdir: undefined } : (spec as RunSpecInput);
}

const program = new Command('sterna')
  .description('Run GPU training on cheap preemptible capacity, as Temporal workflows.')
  .option('--timeout <seconds>', 'how long status, budget and deadline wait for a worker to answer', secondsOption, 30)
  .exitOverride()
  .showHelpAfterError('(add --help for usage)');

function timeoutMs(): number {
  return (program.opts<{ timeout: number }>().timeout) * 1000;
}

/** Valid but probably a mistake (a secret in env...): said on stderr, and in the run's timeline. */
function warn(path: string, spec: RunSpec): void {
  for (const w of specWarnings(spec)) console.error(`${path}: warning: ${w.path}: ${w.message}`);
}

/**
 * Live progress until the run ends (cli/progress.ts): a bar on a terminal, plain lines
 * otherwise, JSON lines with `json` (then the result, as one more JSON line).
 */
async function follow(workflowId: string, json = false): Promise<void> {
  const client = await connect();
  const done = result(client, workflowId);
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => undefined);
  const display = ProgressDisplay.for(process.stdout, json);
  let lastProblem: string | undefined;
  try {
    while (!finished) {
      try {
        display.update(await getStatus(client, workflowId, { timeoutMs: 5000 }));
        lastProblem = undefined;
      } catch (err) {
        // The run may be between workers; say so once rather than go quiet.
        const problem = err instanceof Error ? err.message : String(err);
        if (problem !== lastProblem) process.stderr.write(`\nstatus unavailable: ${problem}\n`);
        lastProblem = problem;
      }
      if (!finished) await new Promise((r) => setTimeout(r, 1000));
    }
    // The final state, so the bar ends at the run's last step and cost.
    await getStatus(client, workflowId, { timeoutMs: 5000 }).then((s) => display.update(s), () => undefined);
  } finally {
    display.stop();
  }
  const outcome = await done;
  if (json) return console.log(JSON.stringify({ result: outcome }));
  for (const line of summaryLines(outcome)) console.log(line);
}

program
  .command('validate')
  .description('check a run spec without starting anything')
  .argument('<spec>', 'path of a JSON run spec')
  .action(async (path: string) => {
    // Checked as a run starting now would be: a deadline already past is an error.
    const spec = readStartSpec(path);
    const check = checkSpec(readSpec(path), { nowMs: Date.now() });
    // A local workdir is listed as a start would pack it (ignore files, symlinks, readable files).
    const workdir = typeof spec.workdir === 'string' ? await listWorkdir(resolve(dirname(path), spec.workdir)).then(() => undefined, (err: unknown) => err) : undefined;
    if (check.ok && workdir === undefined) {
      warn(path, check.spec);
      return console.log(`${path}: valid`);
    }
    for (const p of check.ok ? [] : check.problems) console.error(`${path}: ${p.path}: ${p.message}`);
    if (workdir instanceof WorkdirProblemError) for (const p of workdir.problems) console.error(`${path}: workdir: ${p}`);
    else if (workdir !== undefined) throw workdir;
    process.exitCode = ExitCode.BadInput;
  });

program
  .command('start')
  .description('start a training run from a JSON spec')
  .argument('<spec>', 'path of a JSON run spec')
  .option('--id <workflowId>', 'workflow id (the run id); generated when omitted', runIdArgument)
  .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
  .option('--follow', 'show live progress until the run ends')
  .option('--json', 'print {"started": id}, then (with --follow) one JSON object per change and {"result": ...}')
  .option('--workdir <dir>', 'the directory the command runs in (instead of the spec\'s workdir): packed, uploaded to the run\'s bucket once, unpacked on every attempt')
  .option('--workdir-max-mb <mb>', 'the largest packed workdir accepted, in MB', megabytesOption, DEFAULT_MAX_WORKDIR_BYTES)
  .action(async (path: string, opts: { id?: string; taskQueue: string; follow?: boolean; json?: boolean; workdir?: string; workdirMaxMb: number }) => {
    const spec = readStartSpec(path);
    const check = checkSpec(readSpec(path));
    if (check.ok) warn(path, check.spec);
    const handle = await startTrainingRun(await connect(), spec, {
      workflowId: opts.id,
      taskQueue: opts.taskQueue,
      workdir: opts.workdir,
      // A relative workdir in a spec file is relative to the file, wherever sterna runs.
      workdirBase: dirname(resolve(path)),
      workdirMaxBytes: opts.workdirMaxMb,
      onWorkdir: (w) => {
        const what = `${w.entries} entries, ${sizeText(w.rawBytes)} packed to ${sizeText(w.packedBytes)}`;
        if (opts.json) console.log(JSON.stringify({ workdir: { uri: w.uri, sha256: w.sha256, uploaded: w.uploaded, entries: w.entries, rawBytes: w.rawBytes, packedBytes: w.packedBytes } }));
        else console.error(`workdir: ${what}, ${w.uploaded ? 'uploaded to' : 'unchanged, already at'} ${w.uri}`);
      },
    });
    console.log(opts.json ? JSON.stringify({ started: handle.workflowId }) : `started ${handle.workflowId}`);
    if (opts.follow) await follow(handle.workflowId, opts.json);
  });

program
  .command('status')
  .argument('<runId>', 'the run (workflow) id', runIdArgument)
  .option('--json', 'print the whole status as JSON (with cancelRequested {by, at} once the run was asked to cancel)')
  .action(async (id: string, opts: { json?: boolean }) => {
    const client = await connect();
    const status = await getStatus(client, id, { timeoutMs: timeoutMs() });
    // Only a run that is stopping or ended can have been cancelled: the others need no history read.
    const cancelled = status.phase === 'releasing' || status.phase === 'cancelled' ? await cancelRequestOf(client, id) : undefined;
    if (opts.json) return console.log(JSON.stringify(cancelled ? { ...status, cancelRequested: cancelled } : status, null, 2));
    console.log(progressLine(status));
    for (const line of changedByLines(status, cancelled)) console.log(line);
    for (const line of nodesLines(status)) console.log(line);
    for (const line of lastLineLines(status)) console.log(line);
    for (const line of keptLines(status)) console.log(line);
    for (const line of pricesLines(status)) console.log(line);
    for (const e of status.timeline.slice(-10)) console.log(`  ${e.at}  ${e.event}`);
  });

program
  .command('watch')
  .alias('follow')
  .description('live progress until the run ends: a progress bar with percent and ETA on a terminal, plain lines otherwise')
  .argument('<runId>', 'the run (workflow) id', runIdArgument)
  .option('--json', 'one JSON object per change (phase, zone, model, step, totalSteps, percent, etaSeconds, costUsd, predictedCostUsd, gpuUtilisation, preemptions), then {"result": ...}')
  .action((id: string, opts: { json?: boolean }) => follow(id, opts.json));

program
  .command('budget')
  .description('raise or lower the run budget')
  .argument('<runId>', 'the run (workflow) id', runIdArgument)
  .argument('<usd>', 'the new budget in USD, e.g. 20', usdArgument)
  .action(async (id: string, amount: number) => console.log(progressLine(await setBudget(await connect(), id, amount, { timeoutMs: timeoutMs() }))));

program
  .command('deadline')
  .description('move the run deadline')
  .argument('<runId>', 'the run (workflow) id', runIdArgument)
  .argument('<iso>', 'the new deadline, an ISO 8601 time, e.g. 2030-01-31T18:00:00Z', deadlineArgument)
  .action(async (id: string, at: string) => console.log(progressLine(await setDeadline(await connect(), id, at, { timeoutMs: timeoutMs() }))));

program
  .command('cancel')
  .description('cancel a run; its resources are released first')
  .argument('<runId>', 'the run (workflow) id', runIdArgument)
  .action(async (id: string) => {
    await cancel(await connect(), id);
    console.log(`cancellation requested for ${id}`);
  });

program
  .command('list')
  .option('--query <visibilityQuery>', 'e.g. \'SternaTeam = "team-a"\'')
  .action(async (opts: { query?: string }) => {
    for (const r of await listRuns(await connect(), opts.query)) {
      console.log(`${r.workflowId.padEnd(40)} ${r.status.padEnd(12)} ${(r.phase ?? '').padEnd(16)} ${(r.zone ?? '').padEnd(18)} ${r.costUsd !== undefined ? usd(r.costUsd) : ''}`);
    }
  });

program
  .command('codec-key')
  .description('payload encryption keys (see docs/security.md, "Encrypted payloads")')
  .command('new')
  .description('add a new key, first (it encrypts from now on; the others still decrypt), creating the file with mode 600')
  .option('--file <path>', 'the key file', process.env.STERNA_CODEC_KEYS_FILE ?? defaultKeyFile())
  .action((opts: { file: string }) => {
    const id = addKeyToFile(opts.file);
    console.log(`added key ${id} to ${opts.file}; restart the workers, the codec server and clients to encrypt with it`);
  });

program
  .command('search-attributes')
  .description('print the commands that register Sterna\'s search attributes on a namespace')
  .option('--namespace <namespace>', 'the namespace', '<namespace>')
  .action((opts: { namespace: string }) => console.log(searchAttributeCreateCommands(opts.namespace).join('\n')));

addReaperCommands(program, connect);
addTeamCommands(program, connect, timeoutMs);
addCostCommand(program, connect);
addZonesCommand(program, connect);
addPlanCommand(program, connect, readSpec);
addCheckCommand(program, readSpec, (path) => {
  const { workdir } = readStartSpec(path);
  return typeof workdir === 'string' ? resolve(dirname(path), workdir) : undefined;
});
addLogsCommand(program, connect);
addDeployCommands(program, connect);
addWhoamiCommand(program);

program
  .parseAsync()
  .catch((err: unknown) => {
    // Commander has printed its own message (a missing or malformed argument) already.
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : ExitCode.BadInput;
      return;
    }
    const report = reportFailure(program.args[0] ?? '', err);
    for (const line of report.lines) console.error(line);
    process.exitCode = report.exitCode;
  })
  .finally(() => connected?.connection.close());
