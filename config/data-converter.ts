/**
 * The one place that builds Sterna's Temporal data converter. The worker, the client,
 * the CLI, the demo, the benchmarks and the tests all take it from here, so whatever
 * one writes the others can read, and the tests run with the encryption production runs.
 *
 * Without keys nothing is started: a worker or client that silently wrote plain text
 * would put every run's inputs in the server's history in the clear.
 */
import type { DataConverter } from '@temporalio/common';
import { CodecKeyError, defaultKeyFile, loadCodecKeys } from './codec-keys';
import { AesGcmCodec } from './payload-codec';

export function sternaPayloadCodec(env: NodeJS.ProcessEnv = process.env): AesGcmCodec {
  const keys = loadCodecKeys(env);
  if (!keys) {
    throw new CodecKeyError(
      `no payload encryption key: run \`sterna codec-key new\` (writes ${defaultKeyFile(env)}), or set STERNA_CODEC_KEYS_FILE or STERNA_CODEC_KEYS; see docs/security.md, "Encrypted payloads"`,
    );
  }
  return new AesGcmCodec(keys);
}

export function sternaDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter {
  return { payloadCodecs: [sternaPayloadCodec(env)] };
}
