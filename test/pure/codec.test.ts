/**
 * Payload encryption: the codec (AES-256-GCM, keys by id), the key sets it is given, and
 * the codec server the web UI and the Temporal CLI decode through.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { addKeyToFile, CodecKeyError, loadCodecKeys, newKeyEntry, parseCodecKeys } from '../../codec/keys';
import { startCodecServer, type CodecServer } from '../../codec/server';
import { sternaPayloadCodec } from '../../codec/data-converter';
import { AesGcmCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA, PayloadDecryptionError } from '../../codec/payload-codec';

const SECRET_TEXT = 'hf_live_token_9f8e7d6c';
const text = (bytes?: Uint8Array | null) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
const payloadOf = (value: unknown): Payload => defaultPayloadConverter.toPayload(value);

function codecWith(...entries: string[]): AesGcmCodec {
  return new AesGcmCodec(parseCodecKeys(entries.join('\n'), 'test keys'));
}

describe('the payload codec', () => {
  const k1 = newKeyEntry().entry.replace(/^[^:]+/, 'k1');
  const k2 = newKeyEntry().entry.replace(/^[^:]+/, 'k2');

  it('encrypts every payload with the active key and decrypts it to the same payload', async () => {
    const codec = codecWith(k1);
    const original = [payloadOf({ env: { HF_TOKEN: SECRET_TEXT } }), payloadOf('plain'), payloadOf(null)];
    const encoded = await codec.encode(original);
    for (const p of encoded) {
      assert.equal(text(p.metadata?.encoding), ENCRYPTED_ENCODING);
      assert.equal(text(p.metadata?.[KEY_ID_METADATA]), 'k1');
      assert.ok(!Buffer.from(p.data!).includes(SECRET_TEXT), 'the data is ciphertext');
    }
    assert.deepEqual((await codec.decode(encoded)).map((p) => defaultPayloadConverter.fromPayload(p)), [{ env: { HF_TOKEN: SECRET_TEXT } }, 'plain', null]);
    // A fresh IV each time: the same payload never encrypts the same way twice.
    const [a, b] = await codec.encode([original[1], original[1]]);
    assert.notDeepEqual(Buffer.from(a.data!), Buffer.from(b.data!));
  });

  it('rotates: a new first key encrypts, the old one still decrypts; a retired key is named when needed', async () => {
    const before = await codecWith(k1).encode([payloadOf('written with k1')]);
    const rotated = codecWith(k2, k1);
    assert.equal(defaultPayloadConverter.fromPayload((await rotated.decode(before))[0]), 'written with k1');
    const after = await rotated.encode([payloadOf('written with k2')]);
    assert.equal(text(after[0].metadata?.[KEY_ID_METADATA]), 'k2');
    await assert.rejects(codecWith(k2).decode(before), (err: Error) => err instanceof PayloadDecryptionError && /key "k1"/.test(err.message) && /test keys/.test(err.message));
  });

  it('refuses altered ciphertext, a key id swapped for another, and another key under the same id', async () => {
    const [p] = await codecWith(k1).encode([payloadOf('x')]);
    const flipped = Buffer.from(p.data!);
    flipped[20] ^= 1;
    await assert.rejects(codecWith(k1).decode([{ ...p, data: flipped }]), /does not authenticate/);
    // The id is authenticated data: relabelled as k2 (whose bytes are k1's), it fails.
    const sameBytesAsK2 = `k2:${k1.slice(3)}`;
    await assert.rejects(codecWith(sameBytesAsK2).decode([{ ...p, metadata: { ...p.metadata, [KEY_ID_METADATA]: Buffer.from('k2') } }]), /does not authenticate/);
    await assert.rejects(codecWith(`k1:${k2.slice(3)}`).decode([p]), /does not authenticate/);
  });

  it('passes unencrypted payloads through (history from before the codec, `temporal workflow start` without one)', async () => {
    const plain = payloadOf({ a: 1 });
    assert.deepEqual(await codecWith(k1).decode([plain]), [plain]);
  });
});

describe('codec keys', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'sterna-keys-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('names the entry that is wrong and never prints key material', () => {
    const good = newKeyEntry().entry;
    const short = `k9:${Buffer.alloc(16, 7).toString('base64')}`;
    for (const [keys, message] of [
      [`${good}\n${short}`, /key 2 \(k9\): expected 32 bytes/],
      [`${good},${good}`, /key 2: the id .* appears twice/],
      ['no-colon-here', /key 1: expected <id>:<base64 key>/],
      ['# only a comment', /holds no key/],
    ] as const) {
      assert.throws(() => parseCodecKeys(keys, 'STERNA_CODEC_KEYS'), (err: Error) => {
        assert.ok(err instanceof CodecKeyError);
        assert.match(err.message, message);
        assert.ok(!err.message.includes(short.slice(3)) && !err.message.includes(good.slice(good.indexOf(':') + 1)), 'no key material in the message');
        return true;
      });
    }
  });

  it('reads a key file only when no one else can, and `codec-key new` puts the new key first', () => {
    const file = join(dir, 'codec-keys');
    const first = addKeyToFile(file);
    const second = addKeyToFile(file);
    const keys = loadCodecKeys({ STERNA_CODEC_KEYS_FILE: file })!;
    assert.equal(keys.activeId, second);
    assert.deepEqual([...keys.keys.keys()], [second, first]);
    chmodSync(file, 0o644);
    assert.throws(() => loadCodecKeys({ STERNA_CODEC_KEYS_FILE: file }), /readable by others \(mode 644\); run `chmod 600/);
  });

  it('`sterna codec-key new` creates the file (mode 600) and rotates by putting a new key first', async () => {
    const file = join(dir, 'nested', 'codec-keys');
    const cli = join(__dirname, '..', '..', 'cli', 'main.js');
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { stdout } = await promisify(execFile)(process.execPath, [cli, 'codec-key', 'new', '--file', file]);
      ids.push(/added key (\S+) to/.exec(stdout)![1]);
    }
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.deepEqual([...loadCodecKeys({ STERNA_CODEC_KEYS_FILE: file })!.keys.keys()], ids.reverse());
  });

  it('without any key, refuses to build the data converter and says how to make one', () => {
    assert.equal(loadCodecKeys({ XDG_CONFIG_HOME: dir }), undefined);
    assert.throws(() => sternaPayloadCodec({ XDG_CONFIG_HOME: dir }), /sterna codec-key new/);
    assert.throws(() => sternaPayloadCodec({ STERNA_CODEC_KEYS_FILE: join(dir, 'missing') }), /no file at/);
    assert.throws(() => sternaPayloadCodec({ STERNA_CODEC_KEYS: 'a', STERNA_CODEC_KEYS_FILE: 'b' }), /not both/);
  });
});

describe('the codec server', () => {
  const UI = 'http://127.0.0.1:8233';
  const TOKEN = 'a-token-of-sufficient-length';
  let codec: AesGcmCodec;
  let open: CodecServer;
  let guarded: CodecServer;
  before(async () => {
    codec = sternaPayloadCodec();
    open = await startCodecServer({ codec, corsOrigins: [UI] });
    guarded = await startCodecServer({ codec, corsOrigins: [UI], token: TOKEN });
  });
  after(async () => Promise.all([open?.close(), guarded?.close()]));

  const asJson = (p: Payload) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
  });

  async function post(server: CodecServer, path: string, body: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Namespace': 'default', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, origin: res.headers.get('access-control-allow-origin'), body: (await res.json()) as { payloads?: { metadata: Record<string, string>; data: string }[]; message?: string } };
  }

  it('decodes what the worker encrypted, for the web UI origin (CORS) and the CLI', async () => {
    const [encrypted] = await codec.encode([payloadOf({ HF_TOKEN: SECRET_TEXT })]);
    const res = await post(open, '/decode', { payloads: [asJson(encrypted)] }, { Origin: UI });
    assert.equal(res.status, 200);
    assert.equal(res.origin, UI);
    const decoded = res.body.payloads![0];
    assert.equal(Buffer.from(decoded.metadata.encoding, 'base64').toString(), 'json/plain');
    assert.deepEqual(JSON.parse(Buffer.from(decoded.data, 'base64').toString()), { HF_TOKEN: SECRET_TEXT });
    // encode is the inverse (the UI uses it to send signals and start workflows).
    const round = await post(open, '/encode', { payloads: [decoded] });
    assert.equal(Buffer.from(round.body.payloads![0].metadata.encoding, 'base64').toString(), ENCRYPTED_ENCODING);
  });

  it('answers the browser preflight, and grants no other origin', async () => {
    const preflight = await fetch(`${open.url}/decode`, { method: 'OPTIONS', headers: { Origin: UI, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,x-namespace' } });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), UI);
    assert.match(preflight.headers.get('access-control-allow-headers') ?? '', /X-Namespace/);
    const other = await post(open, '/decode', { payloads: [] }, { Origin: 'https://evil.example' });
    assert.equal(other.origin, null);
  });

  it('with a token, decodes only for `Authorization: Bearer <token>`', async () => {
    const [encrypted] = await codec.encode([payloadOf('x')]);
    assert.equal((await post(guarded, '/decode', { payloads: [asJson(encrypted)] })).status, 401);
    assert.equal((await post(guarded, '/decode', { payloads: [asJson(encrypted)] }, { Authorization: 'Bearer wrong' })).status, 401);
    assert.equal((await post(guarded, '/decode', { payloads: [asJson(encrypted)] }, { Authorization: `Bearer ${TOKEN}` })).status, 200);
  });

  it('says what is wrong with a bad request, and will not listen beyond loopback without a token', async () => {
    assert.match((await post(open, '/decode', { nope: 1 })).body.message!, /expected \{"payloads"/);
    const foreign = { metadata: { encoding: Buffer.from(ENCRYPTED_ENCODING).toString('base64'), [KEY_ID_METADATA]: Buffer.from('gone').toString('base64') }, data: 'AAAA' };
    const res = await post(open, '/decode', { payloads: [foreign] });
    assert.equal(res.status, 400);
    assert.match(res.body.message!, /key "gone"/);
    await assert.rejects(startCodecServer({ codec, corsOrigins: [UI], host: '0.0.0.0' }), /STERNA_CODEC_SERVER_TOKEN/);
  });

});
