/**
 * `npm run emulator -- --port <port> --state-dir <dir> [--gpus-all-regions <n>] [--trace <file>] [--time-factor <n>] [--seed <n>] [--guest synthetic] [--rate-quota <group=limit>]`
 *
 * Starts the GCE emulator and prints the endpoint it listens on. Ctrl-C (SIGINT) or
 * SIGTERM stops the server and leaves the VMs running, as real VMs outlive their API
 * clients; `--kill-vms-on-exit` stops them too.
 */
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { rateQuotaGroup, RATE_QUOTA_GROUPS } from './rate-quotas';
import { startEmulator } from './server';
import { BucketSettingsSchema, DEFAULT_BUCKET_LOCATION, validBucketName, type BucketSettings } from './storage-api';

function number(label: string, { integer = false, min = -Infinity, exclusiveMin = false } = {}) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || (exclusiveMin ? n <= min : n < min)) {
      throw new InvalidArgumentError(`${label} must be ${integer ? 'an integer' : 'a number'} ${exclusiveMin ? '>' : '>='} ${min}`);
    }
    return n;
  };
}

function rateQuota(value: string, previous: Record<string, number> = {}): Record<string, number> {
  const match = /^([a-z_./]+)=(\d+)$/.exec(value);
  const group = match ? rateQuotaGroup(match[1]) : undefined;
  if (!match || !group) throw new InvalidArgumentError(`expected <group>=<requests per window>, group one of ${RATE_QUOTA_GROUPS.map((g) => g.id).join(', ')}`);
  return { ...previous, [group.id]: Number(match[2]) };
}

/** --bucket-location <bucket>=<LOCATION>: the location the storage API gives a local bucket. */
function bucketLocation(value: string, previous: Record<string, BucketSettings> = {}): Record<string, BucketSettings> {
  const match = /^([^=]+)=(.+)$/.exec(value);
  const parsed = match && validBucketName(match[1]) ? BucketSettingsSchema.safeParse({ location: match[2] }) : undefined;
  if (!match || !parsed?.success) throw new InvalidArgumentError('expected <bucket>=<GCS location>, e.g. my-data=ASIA-SOUTHEAST1');
  return { ...previous, [match[1]]: parsed.data };
}

interface CliOptions {
  port: number;
  host: string;
  stateDir: string;
  trace?: string;
  traceStartTick?: number;
  timeFactor: number;
  seed: number;
  spotMeanUpHours?: number;
  spotMeanDownHours?: number;
  preemptionsPerHour?: number;
  killVmsOnExit?: boolean;
  quiet?: boolean;
  rateQuotas: boolean;
  rateQuota?: Record<string, number>;
  rateQuotaWindow?: number;
  guest: 'process' | 'synthetic';
  operationsKept?: number;
  syntheticSteps?: number;
  syntheticStepSeconds?: number;
  syntheticCheckpointEvery?: number;
  bucketsDir?: string;
  bucketLocation?: Record<string, BucketSettings>;
  gpusAllRegions: number;
}

const program = new Command('emulator')
  .description('A local Compute Engine (v1 REST) for Sterna: GPU zones, spot capacity, real VM processes.')
  .option('--port <port>', 'port to listen on (0: any free port)', number('port', { integer: true, min: 0 }), 0)
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--state-dir <dir>', 'where state, VM directories and the log live (reuse it to resume)', join(process.cwd(), '.state', 'emulator'))
  .option('--trace <file>', 'replay a spot availability trace (../shared/traces/*.json)')
  .option('--trace-start-tick <n>', 'trace tick at emulated time 0', number('trace start tick', { integer: true, min: 0 }))
  .option('--time-factor <n>', 'emulated time runs n times faster than real time', number('time factor', { min: 0, exclusiveMin: true }), 1)
  .option('--seed <n>', 'seed of the random spot model and fault injection', number('seed', { integer: true }), 1)
  .option('--spot-mean-up-hours <h>', 'random spot model: mean emulated hours a zone keeps spot capacity', number('mean up hours', { min: 0, exclusiveMin: true }))
  .option('--spot-mean-down-hours <h>', 'random spot model: mean emulated hours a zone is without spot capacity', number('mean down hours', { min: 0, exclusiveMin: true }))
  .option('--preemptions-per-hour <r>', 'random spot model: preemptions per running spot VM per emulated hour', number('preemption rate', { min: 0 }))
  .option('--rate-quota <group=limit>', 'GCE API rate quota: requests per window for one group, e.g. read_requests_per_region=1500 (repeatable)', rateQuota)
  .option('--rate-quota-window <seconds>', 'length of the rate quota refill interval (GCE: 60)', number('rate quota window', { min: 0, exclusiveMin: true }))
  .option('--no-rate-quotas', 'count API calls but never answer 403 rateLimitExceeded')
  .option('--guest <kind>', "what VMs run: 'process' (their startup script) or 'synthetic' (a simulated agent, for scale work)", (v: string) => {
    if (v !== 'process' && v !== 'synthetic') throw new InvalidArgumentError("expected 'process' or 'synthetic'");
    return v;
  }, 'process')
  .option('--operations-kept <n>', 'completed operations kept, oldest dropped first (default 5000)', number('operations kept', { integer: true, min: 1 }))
  .option('--synthetic-steps <n>', 'synthetic guests: steps of a run', number('steps', { integer: true, min: 1 }))
  .option('--synthetic-step-seconds <s>', 'synthetic guests: emulated seconds per step', number('step seconds', { min: 0, exclusiveMin: true }))
  .option('--synthetic-checkpoint-every <n>', 'synthetic guests: steps between checkpoints', number('checkpoint interval', { integer: true, min: 1 }))
  .option('--buckets-dir <dir>', 'local directory standing in for GCS (gs://b/p = <dir>/b/p); synthetic guests write checkpoints there')
  .option('--bucket-location <bucket=LOCATION>', `the storage API's location of a local bucket (default ${DEFAULT_BUCKET_LOCATION}), e.g. my-data=ASIA-SOUTHEAST1 (repeatable)`, bucketLocation)
  .option('--gpus-all-regions <n>', "every project's GPUS_ALL_REGIONS quota (GPUs at once, all regions); 0, as on a new GCP project, fails every GPU VM", number('GPUs', { integer: true, min: 0 }), 0)
  .option('--kill-vms-on-exit', 'kill every VM when the emulator stops')
  .option('--quiet', 'log to <state-dir>/emulator.log only')
  .action(async (opts: CliOptions) => {
    const emulator = await startEmulator({
      port: opts.port,
      host: opts.host,
      stateDir: opts.stateDir,
      trace: opts.trace,
      traceStartTick: opts.traceStartTick,
      timeFactor: opts.timeFactor,
      seed: opts.seed,
      spot: { meanUpHours: opts.spotMeanUpHours, meanDownHours: opts.spotMeanDownHours, preemptionsPerHour: opts.preemptionsPerHour },
      rateQuotas: { enabled: opts.rateQuotas, limits: opts.rateQuota, windowSeconds: opts.rateQuotaWindow },
      guest: opts.guest,
      operationsKept: opts.operationsKept,
      synthetic: {
        ...(opts.syntheticSteps !== undefined ? { steps: opts.syntheticSteps } : {}),
        ...(opts.syntheticStepSeconds !== undefined ? { stepSeconds: opts.syntheticStepSeconds } : {}),
        ...(opts.syntheticCheckpointEvery !== undefined ? { checkpointEvery: opts.syntheticCheckpointEvery } : {}),
      },
      bucketsDir: opts.bucketsDir,
      buckets: opts.bucketLocation,
      gpusAllRegions: opts.gpusAllRegions,
      log: opts.quiet ? undefined : (line) => console.log(`${new Date().toISOString()} ${line}`),
    });
    console.log(`GCE emulator listening on ${emulator.endpoint}`);
    console.log(`  clients: { apiEndpoint: '${emulator.host}', port: ${emulator.port}, protocol: 'http' }  or STERNA_GCE_ENDPOINT=${emulator.endpoint}`);
    console.log(`  admin:   ${emulator.endpoint}/emulator/v1/  (state: ${emulator.stateDir}, time factor ${emulator.timeFactor}, spot model ${emulator.spotModel}, ${emulator.guest} guests)`);
    if (opts.gpusAllRegions === 0) console.log('  GPUS_ALL_REGIONS is 0, as on a new GCP project: no GPU VM can start until you raise it (--gpus-all-regions <n>, or POST /emulator/v1/projects/<project>/quotas)');
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      console.log(`${signal}: stopping the emulator${opts.killVmsOnExit ? ' and its VMs' : '; VMs keep running'}`);
      emulator.close({ killVms: opts.killVmsOnExit ?? false }).then(
        () => process.exit(0),
        (err: Error) => {
          console.error(`emulator: ${err.message}`);
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });

program.parseAsync().catch((err: Error) => {
  console.error(`emulator: ${err.message}`);
  process.exit(1);
});
