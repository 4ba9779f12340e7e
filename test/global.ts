/**
 * Loaded through `require` in .mocharc.js (by every parallel worker) and scripts/mocha-only.sh.
 * Global fixtures run only in mocha's main process: the teardown stops the dev server of a
 * serial run; a parallel worker's dev server is stopped as the worker exits
 * (test/helpers/temporal.ts).
 */
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { newKeyEntry } from '../codec/keys';
import { ensureTemporalCli } from '../processes/temporal-cli';
import { ensureTemporalServer } from '../processes/temporal-server';
import { ensureControlPlane, ensureEtcd } from '../kube/binaries';
import { stopTestEnv } from './helpers/temporal';

// Keep the SDK's logs to errors (runs fail on purpose here) so the test output reads as the behaviour under test.
Runtime.install({
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } },
});

// The Google client libraries must never go looking for credentials off this machine.
process.env.METADATA_SERVER_DETECTION = 'none';

// Payloads are encrypted in every test as in production (codec/data-converter.ts), with
// a key of this run's own, which the workers and CLIs it spawns inherit.
delete process.env.STERNA_CODEC_KEYS_FILE;
process.env.STERNA_CODEC_KEYS = newKeyEntry().entry;
/**
 * Before parallel workers start: the one-time installs (the Temporal CLI, Sterna's Temporal
 * server, Kubernetes built from source, etcd) happen here once, not in two workers at the same time, which would
 * build into one directory and contend for apt's lock. Already installed, this costs a few
 * file checks. A failure is left to the tests that need the binaries to report.
 */
export async function mochaGlobalSetup(this: { isParallelMode?: () => boolean }): Promise<void> {
  if (!this.isParallelMode?.()) return;
  // The pure and emulator tiers (.mocharc.js) start no Temporal server and no Kubernetes: nothing to install.
  if (process.env.STERNA_TEST_TIER === 'pure' || process.env.STERNA_TEST_TIER === 'emulator') return;
  await ensureTemporalCli().catch((err: Error) => console.error(err.message));
  await ensureTemporalServer().catch((err: Error) => console.error(err.message));
  await Promise.all([ensureControlPlane(), ensureEtcd()]).catch((err: Error) => console.error(err.message));
}

export async function mochaGlobalTeardown(): Promise<void> {
  await stopTestEnv();
}
