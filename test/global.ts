/**
 * Loaded through `require` in .mocharc.js (by every parallel worker) and scripts/mocha-only.sh.
 * The global teardown runs only in the process that ran the tests serially; a parallel
 * worker's dev server is stopped when the worker exits (test/helpers/temporal.ts).
 */
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { stopTestEnv } from './helpers/temporal';

// Keep the SDK's logs to errors (runs fail on purpose here) so the test output reads as the behaviour under test.
Runtime.install({
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } },
});

// The Google client libraries must never go looking for credentials off this machine.
process.env.METADATA_SERVER_DETECTION = 'none';

export async function mochaGlobalTeardown(): Promise<void> {
  await stopTestEnv();
}
