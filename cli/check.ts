/**
 * `sterna check [SPEC]`: what a run needs, checked without starting anything — the codec
 * key, the Temporal namespace and its search attributes, the backend's credentials and
 * project, GPU quotas (GPUS_ALL_REGIONS and each allowed region's), the buckets, the image
 * reference (activities/check). It reads the same environment a worker does (STERNA_GCE_*,
 * STERNA_GKE_*, STERNA_STORAGE_*, TEMPORAL_*, STERNA_CODEC_KEYS*).
 *
 *   sterna check examples/run.json
 *   sterna check --json            # exactly the list of findings: [{ check, ok, problem?, fix? }]
 *
 * Exit code: 0 when every check passes (warnings included), 1 when one fails, 2 when the
 * spec itself is invalid (as `sterna validate`).
 */
import type { Connection } from '@temporalio/client';
import type { Command } from 'commander';
import { runChecks } from '../activities/check';
import { addressFromEnvironment, connectionFromEnvironment } from '../client/connect';
import { loadWorkerConfig, WorkerConfigError, type WorkerConfig } from '../config/worker-config';
import { blockingFindings, type Finding } from '../workflows/checks';
import { checkSpec, type RunSpec, type RunSpecInput } from '../workflows/spec';
import { buildCheckTargets } from '../workers/providers';
import { ExitCode } from './report';

/** The findings as lines: `ok`, `warn` (ok, with a problem) or `FAIL`, each problem with its fix. */
export function findingLines(findings: readonly Finding[]): string[] {
  const lines: string[] = [];
  for (const f of findings) {
    const mark = !f.ok ? 'FAIL' : f.problem ? 'warn' : 'ok';
    lines.push(`${mark.padEnd(4)}  ${f.check}${f.problem ? `: ${f.problem}` : ''}`);
    if (f.fix && (f.problem || !f.ok)) lines.push(`      to fix: ${f.fix}`);
  }
  const failed = blockingFindings(findings).length;
  lines.push(failed === 0 ? `every check passed (${findings.length})` : `${failed} of ${findings.length} checks failed`);
  return lines;
}

export async function checkFindings(specInput: RunSpecInput | undefined, env: NodeJS.ProcessEnv = process.env): Promise<{ findings: Finding[]; specInvalid: boolean }> {
  const findings: Finding[] = [];
  let spec: RunSpec | undefined;
  let specInvalid = false;
  if (specInput !== undefined) {
    const checked = checkSpec(specInput);
    if (checked.ok) spec = checked.spec;
    else {
      specInvalid = true;
      findings.push({ check: 'spec', ok: false, problem: checked.problems.map((p) => `${p.path}: ${p.message}`).join('; '), fix: 'correct the spec (`sterna validate <spec>` lists each problem); the checks below ran without it' });
    }
  }
  let connection: Connection | undefined;
  const temporal = {
    address: addressFromEnvironment(),
    connect: async () => {
      const opened = await connectionFromEnvironment();
      connection = opened.connection;
      return { operatorService: opened.connection.operatorService, namespace: opened.namespace, address: opened.address };
    },
  };
  let config: WorkerConfig | undefined;
  try {
    config = loadWorkerConfig(env);
  } catch (err) {
    if (!(err instanceof WorkerConfigError)) throw err;
    findings.push({ check: 'backend', ok: false, problem: err.message.replace(/\n\s*/g, ' '), fix: 'set the variables it names, as for a worker (docs/workers.md)' });
  }
  const built = config ? await buildCheckTargets(config, temporal, env) : undefined;
  try {
    // Without a configuration, what needs none: the key and Temporal.
    findings.push(...(await runChecks(config ? spec : undefined, built?.targets ?? { env, temporal })).filter((f) => config || f.check !== 'backend'));
  } finally {
    await built?.close();
    await connection?.close();
  }
  return { findings, specInvalid };
}

export function addCheckCommand(program: Command, readSpec: (path: string) => RunSpecInput): void {
  program
    .command('check')
    .description('check what a run needs, without starting anything: codec key, Temporal search attributes, credentials and project, GPU quotas (GPUS_ALL_REGIONS, each allowed region), buckets, image')
    .argument('[spec]', 'path of a JSON run spec; without it, only the environment is checked')
    .option('--json', 'print exactly the list of findings as JSON: [{ check, ok, problem?, fix? }]')
    .action(async (path: string | undefined, opts: { json?: boolean }) => {
      const { findings, specInvalid } = await checkFindings(path === undefined ? undefined : readSpec(path));
      // Exactly the keys documented: how a run weighs a finding (transient, checkersOwn) is the run's business.
      if (opts.json) console.log(JSON.stringify(findings.map(({ check, ok, problem, fix }) => ({ check, ok, ...(problem !== undefined ? { problem } : {}), ...(fix !== undefined ? { fix } : {}) }))));
      else for (const line of findingLines(findings)) console.log(line);
      if (specInvalid) process.exitCode = ExitCode.BadInput;
      else if (blockingFindings(findings).length > 0) process.exitCode = ExitCode.Failed;
    });
}
