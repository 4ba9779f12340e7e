/**
 * A Temporal payload codec that encrypts every payload (workflow inputs and results,
 * signals, queries, updates, heartbeat details, failure details) with AES-256-GCM, so
 * that what the Temporal server stores is ciphertext.
 *
 *   { metadata: { encoding: "binary/encrypted", "encryption-key-id": "k1" },
 *     data: iv (12 bytes) | ciphertext of the whole original Payload (protobuf) | tag (16) }
 *
 * The key id travels in the clear so keys can rotate: a payload names the key that
 * decrypts it. The id is bound to the ciphertext as additional authenticated data, so a
 * payload cannot be passed off as another key's. A fresh random IV per payload: with
 * 96-bit random IVs a key should encrypt fewer than 2^32 payloads, far beyond a key's
 * life when keys are rotated as the README says.
 *
 * Payloads that are not encrypted decode as they are: history written before the codec
 * was turned on, and runs started by `temporal workflow start` without a codec endpoint.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { CodecKeys } from './keys';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';

const utf8 = (text: string) => new TextEncoder().encode(text);
const text = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);

export class PayloadDecryptionError extends Error {
  override name = 'PayloadDecryptionError';
}

export function isEncrypted(payload: Payload): boolean {
  return text(payload.metadata?.encoding) === ENCRYPTED_ENCODING;
}

export class AesGcmCodec implements PayloadCodec {
  constructor(private readonly keys: CodecKeys) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const id = this.keys.activeId;
    const key = this.keys.keys.get(id)!;
    return payloads.map((payload) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv(ALGORITHM, key, iv);
      cipher.setAAD(Buffer.from(id, 'utf8'));
      const plain = temporal.api.common.v1.Payload.encode(payload).finish();
      const data = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return { metadata: { encoding: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8(id) }, data };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => (isEncrypted(payload) ? this.decrypt(payload) : payload));
  }

  private decrypt(payload: Payload): Payload {
    const id = text(payload.metadata?.[KEY_ID_METADATA]) ?? '';
    const key = this.keys.keys.get(id);
    if (!key) {
      throw new PayloadDecryptionError(`payload encrypted with key ${JSON.stringify(id)}, which is not among the keys of ${this.keys.source}; add it back (keys are retired only once no history needs them)`);
    }
    const data = Buffer.from(payload.data ?? new Uint8Array());
    if (data.length < IV_BYTES + TAG_BYTES) throw new PayloadDecryptionError(`payload encrypted with key ${id} is too short to be one`);
    const decipher = createDecipheriv(ALGORITHM, key, data.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(id, 'utf8'));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new PayloadDecryptionError(`payload encrypted with key ${id} does not authenticate: it was altered, or ${this.keys.source} holds another key under that id`);
    }
    return temporal.api.common.v1.Payload.decode(plain);
  }
}
