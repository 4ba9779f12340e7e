import { strict as assert } from 'node:assert';
import type { InstancesClient } from '@google-cloud/compute/build/src/v1';
import { computeClients } from '../../activities/providers/gce-clients';
import { CallDeadlineExceeded, isRateLimited, isTransient, retryTransient, withDeadline } from '../../activities/providers/transient';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

// The provider's own clients (gce-clients.ts): the real compute client, with google-gax's retry left to transient.ts.
describe('transient API errors, as the real compute client reports them', function () {
  this.timeout(60_000);
  let emulator: TestEmulator;
  let instances: InstancesClient;
  const get = () => instances.get({ project: 'p', zone: 'us-central1-a', instance: 'nothing-here' });

  before(async () => {
    emulator = await startTestEmulator({});
    instances = computeClients(emulator.clientOptions).instances;
  });
  after(async () => {
    await instances?.close();
    await emulator?.stop();
  });

  async function errorOf(fault?: Parameters<TestEmulator['admin']['injectFault']>[0]): Promise<unknown> {
    if (fault) await emulator.admin.injectFault({ ...fault, count: 1 });
    return get().then(() => assert.fail('expected an error'), (e: unknown) => e);
  }

  it('calls 503, 500 and 429 transient, 404 not', async () => {
    assert.equal(isTransient(await errorOf({ fraction: 1, status: 503 })), true);
    assert.equal(isTransient(await errorOf({ fraction: 1, status: 500 })), true);
    assert.equal(isTransient(await errorOf({ fraction: 1, status: 429 })), true);
    assert.equal(isTransient(await errorOf()), false);
  });

  it('calls GCE\'s 403 rateLimitExceeded transient and rate-limited (the fleet observer gives way), and a plain 403 neither', async () => {
    await emulator.admin.setRateQuotas({ limits: { read_requests_per_region: 1 } });
    try {
      await get().catch(() => undefined);
      const limited = await get().then(() => assert.fail('expected 403'), (e: unknown) => e);
      // google-gax 6: the HTTP status GCE answered, and the gRPC code it maps to.
      assert.deepEqual({ http: (limited as { httpStatusCode?: number }).httpStatusCode, code: (limited as { code?: number }).code }, { http: 403, code: 7 });
      assert.equal(isTransient(limited), true, String(limited));
      assert.equal(isRateLimited(limited), true, String(limited));
    } finally {
      await emulator.admin.setRateQuotas({ limits: { read_requests_per_region: null } });
    }
    const forbidden = Object.assign(new Error('{"error":{"code":403,"message":"Required permission compute.instances.get"}}'), { code: 403 });
    assert.equal(isTransient(forbidden), false);
    assert.equal(isRateLimited(forbidden), false);
    assert.equal(isRateLimited(await errorOf({ fraction: 1, status: 503 })), false, 'a 503 is not the quota');
  });

  it('calls a refused connection and its own deadline transient', async () => {
    const closed = computeClients({ ...emulator.clientOptions, port: 1 }).instances;
    try {
      const err = await closed.get({ project: 'p', zone: 'us-central1-a', instance: 'x' }).catch((e: unknown) => e);
      assert.equal(isTransient(err), true, String(err));
    } finally {
      await closed.close();
    }
    assert.equal(isTransient(new CallDeadlineExceeded('get', 10)), true);
  });

  it('rides out a burst of 503s and answers with the real result', async () => {
    await emulator.admin.injectFault({ fraction: 1, status: 503, count: 4 });
    let retries = 0;
    const err = await retryTransient(get, { initialDelayMs: 20, onRetry: () => retries++ }).catch((e: unknown) => e);
    assert.equal((err as { httpStatusCode?: number }).httpStatusCode, 404, 'the real answer after the burst');
    assert.equal(retries, 4);
  });

  it('stops waiting on a hung call at its deadline', async () => {
    await emulator.admin.injectFault({ fraction: 1, hangMs: 3000, count: 1 });
    const err = await withDeadline(get(), 300, 'get').catch((e: unknown) => e);
    assert.ok(err instanceof CallDeadlineExceeded);
  });
});
