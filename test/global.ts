/** Mocha global fixtures (loaded through .mocharc.json `require`). */
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import { newKeyEntry } from '../config/codec-keys';
import { stopTestEnv } from './helpers/temporal';

// Keep the SDK's logs to errors (runs fail on purpose here) so the test output reads as the behaviour under test.
Runtime.install({
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } },
});

// The Google client libraries must never go looking for credentials off this machine.
process.env.METADATA_SERVER_DETECTION = 'none';

// Payloads are encrypted in every test as in production (config/data-converter.ts), with
// a key of this run's own, which the workers and CLIs it spawns inherit.
delete process.env.STERNA_CODEC_KEYS_FILE;
process.env.STERNA_CODEC_KEYS = newKeyEntry().entry;

export async function mochaGlobalTeardown(): Promise<void> {
  await stopTestEnv();
}
