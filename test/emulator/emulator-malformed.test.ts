/**
 * 200 malformed requests: bad JSON, wrong types, invalid values, unknown zones, path
 * traversal in names, unknown paths and methods, bad filters and query parameters.
 * Each gets a 4xx with GCE's error JSON, nothing is written outside the state dir, and
 * the server keeps serving.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { InstancesClient, ZonesClient } from '@google-cloud/compute';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

interface Raw {
  method: string;
  path: string;
  body?: string | Buffer;
}

function send(port: number, r: Raw): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    // node:http sends the path byte for byte (fetch would normalise "..").
    const req = request({ host: '127.0.0.1', port, method: r.method, path: r.path, headers: r.body === undefined ? {} : { 'Content-Type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    if (r.body !== undefined) req.write(r.body);
    req.end();
  });
}

const P = '/compute/v1/projects/malformed-test';
const Z = `${P}/zones/us-central1-a`;
const valid = { name: 'vm-ok', machineType: 'zones/us-central1-a/machineTypes/e2-standard-2' };

function insertBodies(): unknown[] {
  return [
    { ...valid, name: 123 },
    { ...valid, name: 'UPPER' },
    { ...valid, name: '-leading' },
    { ...valid, name: 'trailing-' },
    { ...valid, name: 'a'.repeat(64) },
    { ...valid, name: '../../state' },
    { ...valid, name: 'vm/../../x' },
    { ...valid, name: '' },
    { machineType: valid.machineType },
    { name: 'vm-x' },
    { ...valid, machineType: {} },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/no-such-type' },
    { ...valid, machineType: 'zones/us-east1-b/machineTypes/e2-standard-2' },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/../../etc' },
    { ...valid, labels: 'x' },
    { ...valid, labels: { a: 1 } },
    { ...valid, labels: { Bad: 'x' } },
    { ...valid, labels: { ok: 'Bad Value' } },
    { ...valid, metadata: { items: 'x' } },
    { ...valid, metadata: { items: [{ key: 5, value: 'x' }] } },
    { ...valid, metadata: { items: [{ key: 'a b', value: 'x' }] } },
    { ...valid, metadata: { items: [{ key: 'k', value: 'x' }, { key: 'k', value: 'y' }] } },
    { ...valid, scheduling: [] },
    { ...valid, scheduling: { automaticRestart: 'yes' } },
    { ...valid, scheduling: { provisioningModel: 'CHEAP' } },
    { ...valid, scheduling: { provisioningModel: 'SPOT', automaticRestart: true } },
    { ...valid, scheduling: { provisioningModel: 'SPOT', onHostMaintenance: 'MIGRATE' } },
    { ...valid, scheduling: { provisioningModel: 'STANDARD', preemptible: true } },
    { ...valid, scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'EXPLODE' } },
    { ...valid, guestAccelerators: [{ acceleratorCount: 'x', acceleratorType: 'nvidia-tesla-t4' }] },
    { ...valid, guestAccelerators: [{ acceleratorCount: 1, acceleratorType: 'nvidia-tesla-t4' }] },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/n1-standard-4', guestAccelerators: [{ acceleratorCount: 3, acceleratorType: 'nvidia-tesla-t4' }], scheduling: { onHostMaintenance: 'TERMINATE' } },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/n1-standard-4', guestAccelerators: [{ acceleratorCount: 1, acceleratorType: 'nvidia-tesla-p100' }], scheduling: { onHostMaintenance: 'TERMINATE' } },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/n1-standard-4', guestAccelerators: [{ acceleratorCount: 1, acceleratorType: 'nvidia-tesla-t4' }] },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/g2-standard-4' },
    { ...valid, machineType: 'zones/us-central1-a/machineTypes/g2-standard-4', scheduling: { onHostMaintenance: 'SOMETIMES' } },
    { ...valid, disks: {} },
    { ...valid, disks: [{ boot: 'yes' }] },
    { ...valid, networkInterfaces: 'default' },
    { ...valid, serviceAccounts: [{ scopes: 'all' }] },
    { ...valid, tags: { items: [1, 2] } },
    { ...valid, description: 42 },
    [],
    'a string',
    42,
    null,
  ];
}

function malformed(): { label: string; req: Raw; status?: number }[] {
  const cases: { label: string; req: Raw; status?: number }[] = [];
  const add = (label: string, req: Raw, status?: number) => cases.push({ label, req, status });
  for (const body of ['{', '[1,2', 'nul', '{"name": "vm-a",}', "{'name': 'x'}", '\u0000\u0001\u0002', '{"name": "vm-a"', 'undefined', '{"a":1}{"b":2}', '<xml/>']) {
    add(`bad JSON ${JSON.stringify(body)}`, { method: 'POST', path: `${Z}/instances`, body }, 400);
  }
  insertBodies().forEach((b, i) => add(`bad instance #${i} ${JSON.stringify(b).slice(0, 60)}`, { method: 'POST', path: `${Z}/instances`, body: JSON.stringify(b) }));
  for (const zone of ['mars-central1-z', 'us-central1-q', 'us-central9-a', 'UPPER', 'a'.repeat(70), 'us-central1-a-', '%2e%2e', '..', '%2F', 'zone%00x']) {
    add(`unknown or bad zone ${zone} (list)`, { method: 'GET', path: `${P}/zones/${zone}/instances` });
    add(`unknown or bad zone ${zone} (insert)`, { method: 'POST', path: `${P}/zones/${zone}/instances`, body: JSON.stringify(valid) });
    add(`unknown or bad zone ${zone} (operations)`, { method: 'GET', path: `${P}/zones/${zone}/operations` });
  }
  const traversal = ['..', '%2e%2e', '.', '..%2f..%2fstate.json', '%2F', '%2Fetc%2Fpasswd', 'a%00b', '..%5c..', '%2e%2e%2f%2e%2e', 'x%0ay', 'UPPER', 'a'.repeat(64), '-x', 'a_b', '%zz', '%', 'vm%20one', '%c0%ae%c0%ae'];
  for (const name of traversal) {
    add(`instance name ${name} (get)`, { method: 'GET', path: `${Z}/instances/${name}` });
    add(`instance name ${name} (delete)`, { method: 'DELETE', path: `${Z}/instances/${name}` });
    add(`instance name ${name} (guest attributes)`, { method: 'GET', path: `${Z}/instances/${name}/getGuestAttributes?queryPath=sterna/` });
    add(`operation name ${name}`, { method: 'POST', path: `${Z}/operations/${name}/wait` });
    add(`project ${name}`, { method: 'GET', path: `/compute/v1/projects/${name}/zones` });
  }
  for (const path of ['/', '/compute', '/compute/v1', '/compute/v2/projects/p/zones', '/compute/v1/projects', `${P}/foo`, `${Z}/disks`, `${Z}/instances/vm-x/start`, `${Z}/instances/vm-x/getGuestAttributes/extra/more`, `${P}/regions/mars-north9`, `${P}/aggregated/disks`, `${Z}/machineTypes/nope`, `${Z}/acceleratorTypes/nvidia-h200`, '/emulator/v1/nope', '/emulator/v2/health', '/computeMetadata/v1/instance/name', '/favicon.ico', '/compute/v1/projects/p/zones/us-central1-a/instances/vm-x/../../../../state.json']) {
    add(`unknown path ${path}`, { method: 'GET', path });
  }
  for (const [method, path] of [['PUT', `${Z}/instances`], ['PATCH', `${Z}/instances/vm-x`], ['DELETE', `${P}/zones`], ['POST', `${P}/regions/us-central1`], ['PUT', `${Z}/operations/operation-1/wait`], ['POST', `${Z}/machineTypes`]] as const) {
    add(`method ${method} ${path}`, { method, path, body: '{}' });
  }
  for (const filter of ['labels.x =', '(((', 'name eq [', '= x', 'name = "unterminated', 'AND AND', 'name ~ x', '(name = a', 'name = a)', 'labels.$$ = 1']) {
    add(`bad filter ${filter}`, { method: 'GET', path: `${Z}/instances?filter=${encodeURIComponent(filter)}` });
    add(`bad operations filter ${filter}`, { method: 'GET', path: `${Z}/operations?filter=${encodeURIComponent(filter)}` });
  }
  for (const q of ['maxResults=-1', 'maxResults=abc', 'maxResults=501', 'maxResults=1.5', 'pageToken=!!!notatoken', 'pageToken=LTE']) {
    add(`bad query ${q}`, { method: 'GET', path: `${Z}/instances?${q}` });
  }
  add('bad requestId', { method: 'POST', path: `${Z}/instances?requestId=${encodeURIComponent('not a uuid!')}`, body: JSON.stringify(valid) });
  add('bad guest attribute path', { method: 'GET', path: `${Z}/instances/vm-x/getGuestAttributes?queryPath=${encodeURIComponent('../x')}` });
  add('body too large', { method: 'POST', path: `${Z}/instances`, body: Buffer.alloc(3 * 1024 * 1024, 'a') }, 413);
  for (const [path, body] of [
    ['/emulator/v1/zones/us-central1-a/capacity', '{"accelerator": 5}'],
    ['/emulator/v1/zones/us-central1-a/capacity', '{"accelerator": "nvidia-l4", "spot": -1}'],
    ['/emulator/v1/zones/us-central1-a/capacity', '{"accelerator": "nvidia-zzz", "spot": 1}'],
    ['/emulator/v1/zones/mars-1/capacity', '{"accelerator": "nvidia-l4", "spot": 1}'],
    ['/emulator/v1/zones/us-central1-a/capacity', '{bad json'],
    ['/emulator/v1/projects/p/regions/us-central1/quotas', '{"metric": "lower case", "limit": 1}'],
    ['/emulator/v1/projects/p/regions/mars/quotas', '{"metric": "NVIDIA_L4_GPUS", "limit": 1}'],
    ['/emulator/v1/projects/p/zones/us-central1-a/instances/nope/preempt', '{}'],
    ['/emulator/v1/zones/us-central1-a/instances/nope/preempt', '{"afterSeconds": "soon"}'],
    ['/emulator/v1/faults', '{"fraction": 2}'],
    ['/emulator/v1/faults', '{"fraction": 0.5, "status": 418}'],
    ['/emulator/v1/faults', '{"fraction": 0.5, "path": "("}'],
    ['/emulator/v1/faults', '{"fraction": 0.5, "unknownField": 1}'],
  ] as const) {
    add(`admin ${path} ${body}`, { method: 'POST', path, body });
  }
  return cases;
}

describe('GCE emulator: malformed requests', function () {
  this.timeout(120_000);
  let emu: TestEmulator;
  // The state dir sits alone in a private directory, so a file escaping it would show.
  const root = mkdtempSync(join(tmpdir(), 'sterna-malformed-'));
  before(async () => (emu = await startTestEmulator({ timeFactor: 20, stateDir: join(root, 'state') })));
  after(async () => {
    await emu?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('answers each of 200 malformed requests with a GCE-style 4xx and keeps serving', async () => {
    const cases = malformed();
    assert.ok(cases.length >= 200, `${cases.length} cases`);
    const failures: string[] = [];
    for (const c of cases.slice(0, 200)) {
      const res = await send(emu.port, c.req);
      let json: { error?: { code?: number; message?: string; errors?: { reason?: string; domain?: string; message?: string }[] } } | undefined;
      try {
        json = JSON.parse(res.text) as typeof json;
      } catch {
        json = undefined;
      }
      const e = json?.error;
      const shaped = e && e.code === res.status && typeof e.message === 'string' && typeof e.errors?.[0]?.reason === 'string' && typeof e.errors[0].domain === 'string';
      if (res.status < 400 || res.status >= 500 || !shaped || (c.status !== undefined && res.status !== c.status)) {
        failures.push(`${c.label}: ${res.status} ${res.text.slice(0, 160)}`);
      }
    }
    assert.deepEqual(failures, []);

    // Still serving, through the real client, and nothing was created by the bad requests.
    const [zones] = await new ZonesClient(emu.clientOptions).list({ project: 'malformed-test' });
    assert.ok(zones.length > 10);
    const instances = new InstancesClient(emu.clientOptions);
    const [list] = await instances.list({ project: 'malformed-test', zone: 'us-central1-a' });
    assert.deepEqual(list.map((i) => i.name), []);
    const [op] = await instances.insert({ project: 'malformed-test', zone: 'us-central1-a', instanceResource: valid });
    assert.equal(op.latestResponse.name?.startsWith('operation-'), true);
    assert.deepEqual(readdirSync(root), ['state'], 'no file appeared next to the state dir');
  });
});
