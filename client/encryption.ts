/**
 * Whether a client's payloads are encrypted: Sterna's codec (codec/data-converter.ts) by
 * default, plain text only when the caller said so. Every client call checks first, so a
 * Temporal Client built by hand without the codec fails with a reason instead of writing a
 * spec into the server's history in the clear (or failing to read the encrypted status a
 * worker answers with "Unknown encoding").
 */
import type { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { CodecKeyError } from '../codec/keys';
import { sternaDataConverter } from '../codec/data-converter';
import { AesGcmCodec } from '../codec/payload-codec';
import { ClientErrorKind, SternaClientError } from './errors';

/** Clients connected with `plaintextPayloads: true`: the one way to opt out. */
const optedOut = new WeakSet<Client>();

/**
 * Sterna's data converter for the environment's keys; without keys, or with malformed ones,
 * a SternaClientError that says how to supply them and how to opt out.
 */
export function sternaClientDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter {
  try {
    return sternaDataConverter(env);
  } catch (err) {
    if (!(err instanceof CodecKeyError)) throw err;
    throw new SternaClientError(
      ClientErrorKind.PayloadEncryption,
      err.message,
      "give this process the keys Sterna's workers use (STERNA_CODEC_KEYS_FILE=<file> or STERNA_CODEC_KEYS=<id>:<base64>,...); to send payloads unencrypted instead, connect with connectFromEnvironment({ plaintextPayloads: true })",
      { cause: err },
    );
  }
}

export function markPlaintext(client: Client): Client {
  optedOut.add(client);
  return client;
}

/** `to` opted out of encryption as `from` did (a client of another namespace on the same connection). */
export function plaintextAs(from: Client, to: Client): Client {
  if (optedOut.has(from)) optedOut.add(to);
  return to;
}

/** Throws unless `client` encrypts with Sterna's codec or was connected with the explicit opt-out. */
export function requireEncryption(client: Client): void {
  if (optedOut.has(client)) return;
  if (client.options.loadedDataConverter.payloadCodecs.some((codec) => codec instanceof AesGcmCodec)) return;
  throw new SternaClientError(
    ClientErrorKind.PayloadEncryption,
    'this Temporal Client has no Sterna payload codec: a run started through it would be stored in plain text, and it cannot read what Sterna\'s workers encrypt',
    'connect with connectFromEnvironment() (it applies the codec), or build the Client with `dataConverter: sternaDataConverter()`; to send payloads unencrypted, connect with connectFromEnvironment({ plaintextPayloads: true })',
  );
}
