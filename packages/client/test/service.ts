/**
 * Another service using the installed client: test/client-package.test.ts copies this file
 * into a project outside the repository that installed the packed tarball, type-checks it
 * with tsc against the package's declarations, and runs it (an ES module, as README's
 * example) against the test stack. It prints one JSON object per line for the test:
 *
 *   run <spec.json> <workflowId> <taskQueue> [workdir]   start (packing and uploading the workdir),
 *                                              follow until training, read the log, cancel, read the outcome
 *   plaintext <spec.json> <workflowId> <taskQueue>   start with the explicit opt-out
 *   connect                                    connect only (the test runs it without a key)
 *
 * The server and namespace come from TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE, the keys from
 * STERNA_CODEC_KEYS and the storage API from STERNA_STORAGE_ENDPOINT, as a deployed
 * service would get them.
 */
import { readFileSync } from 'node:fs';
import { cancel, connectFromEnvironment, getStatus, result, runLogs, setBudget, startTrainingRun, SternaClientError, type LogEvent, type RunSpecInput, type RunStatus } from '@sterna/client';
import type { PlanResult } from '@sterna/client/plan';

type SternaClient = Awaited<ReturnType<typeof connectFromEnvironment>>;

const say = (line: object) => console.log(JSON.stringify(line));

function failure(err: unknown): object {
  if (err instanceof SternaClientError) return { name: err.name, kind: err.kind, message: err.message, hint: err.hint };
  return { name: 'unexpected', message: String(err) };
}

async function follow(client: SternaClient, workflowId: string, timeoutMs = 120_000): Promise<RunStatus> {
  const phases: string[] = [];
  for (const until = Date.now() + timeoutMs; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
    const status = await getStatus(client, workflowId, { timeoutMs: 10_000 });
    if (phases.at(-1) !== status.phase) phases.push(status.phase);
    // Training, with a step the trainer reported: the run is doing work.
    if (status.phase === 'training' && status.step !== undefined) {
      say({ followed: { phases, step: status.step, zone: status.zone, costUsd: status.costUsd } });
      return status;
    }
  }
  throw new Error(`run ${workflowId} did not reach training in ${timeoutMs / 1000} s; phases seen: ${phases.join(', ')}`);
}

async function main(): Promise<void> {
  const [mode, specFile, workflowId, taskQueue, workdir] = process.argv.slice(2);
  const spec = specFile ? (JSON.parse(readFileSync(specFile, 'utf8')) as RunSpecInput) : undefined;
  if (mode === 'connect') {
    const client = await connectFromEnvironment();
    await client.connection.close();
    return say({ connected: true });
  }
  if (mode === 'plaintext' && spec) {
    const client = await connectFromEnvironment({ plaintextPayloads: true });
    const run = await startTrainingRun(client, spec, { workflowId, taskQueue });
    await client.connection.close();
    return say({ started: run.workflowId });
  }
  if (mode === 'run' && spec) {
    const client = await connectFromEnvironment();
    let sha256: string | undefined;
    const run = await startTrainingRun(client, spec, {
      workflowId,
      taskQueue,
      workdir,
      onWorkdir: (w) => {
        sha256 = w.sha256;
        say({ workdir: { uri: w.uri, sha256: w.sha256, uploaded: w.uploaded, entries: w.entries } });
      },
    });
    say({ started: run.workflowId });
    await follow(client, run.workflowId);
    // LOGS: the run's lines as they are shipped, until the agent's line about the workdir it unpacked.
    const logs: Extract<LogEvent, { kind: 'line' }>[] = [];
    for await (const event of runLogs(client, run.workflowId, { follow: true, pollMs: 300, signal: AbortSignal.timeout(60_000) })) {
      if (event.kind !== 'line') continue;
      logs.push(event);
      if (sha256 === undefined || event.text.includes(sha256)) break;
    }
    say({ logs: logs.map(({ attempt, stream, text }) => ({ attempt, stream, text })) });
    await cancel(client, run.workflowId);
    say({ cancelRequested: true });
    const outcome = await result(client, run.workflowId).then(
      (value) => ({ completed: value.status }),
      (err: unknown) => ({ failed: failure(err) }),
    );
    say({ outcome });
    await client.connection.close();
    return;
  }
  throw new Error(`usage: service.js run <spec.json> <workflowId> <taskQueue> [workdir] | plaintext <spec.json> <workflowId> <taskQueue> | connect (got ${process.argv.slice(2).join(' ')})`);
}

/**
 * Never called: tsc must reject each misuse, so the declarations are real types (an `any`
 * from a declaration that did not resolve would make an expect-error line an error itself).
 */
export function misuses(client: SternaClient, spec: RunSpecInput, plan: PlanResult): void {
  // @ts-expect-error a budget is a number of USD
  void setBudget(client, 'run-1', '20');
  // @ts-expect-error a spec needs a command
  void startTrainingRun(client, { resources: spec.resources, checkpoint: spec.checkpoint });
  // @ts-expect-error a plan's rows are objects with a zone, not strings
  plan.rows.map((row) => row.toUpperCase());
}

await main().catch((err: unknown) => {
  say({ error: failure(err) });
  process.exitCode = 1;
});
