/**
 * Partial responses (`X-Goog-FieldMask` / `fields`), as Google APIs serve them, and the fleet
 * listing that reads one: the observer and the reaper see each Sterna instance's run without
 * listing its 22 KB startup script every interval.
 */
import { strict as assert } from 'node:assert';
import { InstancesClient, ZoneOperationsClient, type protos } from '@google-cloud/compute';
import { GceProvider, operationsOn, workflowIdOfDescription } from '../../activities/providers/gce';
import { catalogPriceBook } from '../../config/price-book';
import { applyFieldMask, parseFieldMask } from '../../emulator/partial-response';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

type IInstance = protos.google.cloud.compute.v1.IInstance;

const PROJECT = 'fields-test';
const ZONE = 'us-central1-a';
const OTHER_ZONE = 'us-east1-b';
const mask = (fields: string) => ({ otherArgs: { headers: { 'X-Goog-FieldMask': fields } } });

describe('partial responses (pure)', () => {
  const list = {
    kind: 'compute#instanceAggregatedList',
    nextPageToken: 't',
    items: {
      'zones/a': { instances: [{ name: 'x', status: 'RUNNING', scheduling: { provisioningModel: 'SPOT', automaticRestart: false }, metadata: { items: [{ key: 'k', value: 'v' }] } }] },
      'zones/b': { warning: { code: 'NO_RESULTS_ON_PAGE' } },
    },
  };

  it('keeps the selected paths through maps (*) and arrays, and nothing else', () => {
    assert.deepEqual(applyFieldMask(list, parseFieldMask('nextPageToken,items/*/instances(name,scheduling/provisioningModel)')), {
      nextPageToken: 't',
      items: { 'zones/a': { instances: [{ name: 'x', scheduling: { provisioningModel: 'SPOT' } }] }, 'zones/b': {} },
    });
  });

  it('reads dots like slashes and merges selections of one field', () => {
    assert.deepEqual(applyFieldMask(list.items['zones/a'].instances[0], parseFieldMask('scheduling.provisioningModel, scheduling(automaticRestart), metadata')), {
      scheduling: { provisioningModel: 'SPOT', automaticRestart: false },
      metadata: { items: [{ key: 'k', value: 'v' }] },
    });
  });

  it('refuses a malformed mask with GCE\'s 400, naming where', () => {
    for (const bad of ['', 'items(', 'items/', 'a,,b', 'a)b', 'na-me']) {
      assert.throws(() => parseFieldMask(bad), (err: { status?: number; message?: string }) => err.status === 400 && /Invalid field selection/.test(err.message ?? ''), bad);
    }
  });

  it('reads a run\'s workflow id from the description Sterna writes, and nothing from any other', () => {
    assert.equal(workflowIdOfDescription('Sterna training run team-a/run 7'), 'team-a/run 7');
    assert.equal(workflowIdOfDescription('a VM of someone else'), undefined);
    assert.equal(workflowIdOfDescription('Sterna training run '), undefined);
    assert.equal(workflowIdOfDescription(undefined), undefined);
  });
});

describe('partial responses on the GCE emulator, through the real client', function () {
  this.timeout(60_000);
  let emu: TestEmulator;
  let instances: InstancesClient;

  const insert = async (resource: IInstance, zone = ZONE) => {
    const [lro] = await instances.insert({ project: PROJECT, zone, instanceResource: resource });
    const ops = new ZoneOperationsClient(emu.clientOptions);
    for (;;) {
      const [op] = await ops.wait({ project: PROJECT, zone, operation: lro.latestResponse.name as string });
      if (op.status === 'DONE') return;
    }
  };
  const vm = (name: string, extra: Partial<IInstance>, zone = ZONE): IInstance => ({
    name,
    machineType: `zones/${zone}/machineTypes/e2-standard-2`,
    disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }],
    ...extra,
  });

  before(async () => {
    emu = await startTestEmulator({ timeFactor: 20 });
    instances = new InstancesClient(emu.clientOptions);
    const owner = (run: string) => ({ 'sterna-run': run, 'sterna-exec': 'e1', 'sterna-attempt': '1' });
    const script = { key: 'startup-script', value: 'x'.repeat(20_000) };
    // One of today's instances, one from before the description named the run, and one no run owns.
    await insert(vm('st-new', { description: 'Sterna training run wf-new', labels: owner('wf-new'), metadata: { items: [script, { key: 'sterna-run-id', value: 'wf-new' }] } }));
    await insert(vm('st-old', { labels: owner('wf-old'), metadata: { items: [script, { key: 'sterna-run-id', value: 'wf-old' }] } }, OTHER_ZONE), OTHER_ZONE);
    await insert(vm('other', { labels: { team: 'x' } }));
  });
  after(async () => emu?.stop());

  it('answers an aggregated list with only the masked fields, paging as before', async () => {
    const seen: IInstance[] = [];
    for await (const [, scoped] of instances.aggregatedListAsync({ project: PROJECT, maxResults: 1 }, { autoPaginate: false, ...mask('nextPageToken,items/*/instances(name,description,status)') })) {
      seen.push(...(scoped.instances ?? []));
    }
    assert.deepEqual(seen.map((i) => i.name).sort(), ['other', 'st-new', 'st-old']);
    for (const instance of seen) {
      assert.ok(!instance.metadata, 'metadata is left out');
      assert.deepEqual(Object.keys(instance.labels ?? {}), [], 'labels are left out');
      assert.ok(instance.status);
    }
    assert.equal(seen.find((i) => i.name === 'st-new')?.description, 'Sterna training run wf-new');
  });

  it('refuses a malformed mask with a 400 and does not act on the request', async () => {
    const err = await instances.insert({ project: PROJECT, zone: ZONE, instanceResource: vm('masked', {}) }, mask('name(')).then(
      () => undefined,
      (e: { httpStatusCode?: number; message?: string }) => e,
    );
    assert.equal(err?.httpStatusCode, 400, err?.message);
    await assert.rejects(instances.get({ project: PROJECT, zone: ZONE, instance: 'masked' }), /not found/i);
  });

  it("lists the fleet with every Sterna instance's run: from the description, or once from an older instance's metadata", async () => {
    const gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100 });
    await emu.admin.resetApiUsage();
    const fleet = await gce.listFleet();
    assert.deepEqual(fleet.map((r) => [r.ref.name, r.workflowId, r.owner.run]).sort(), [
      ['st-new', 'wf-new', 'wf-new'],
      ['st-old', 'wf-old', 'wf-old'],
    ]);
    await gce.listFleet();
    const { methods } = (await emu.admin.apiUsage(PROJECT)).projects[0];
    assert.equal(methods['compute.instances.aggregatedList'].calls, 2);
    assert.equal(methods['compute.instances.get'].calls, 1, 'the older instance is read once, then remembered');
  });

  it('tells which of the instances it is asked about were preempted, listing only their own operations', async () => {
    const spot = { scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'STOP' } };
    for (const name of ['pa-1', 'pa-2', 'pa-3']) await insert(vm(name, spot));
    for (const name of ['pa-1', 'pa-3']) await emu.admin.preempt(PROJECT, ZONE, name);
    const ops = new ZoneOperationsClient(emu.clientOptions);
    const preemptedOps = async (filter: string) => {
      const [list] = await ops.list({ project: PROJECT, zone: ZONE, filter });
      return list.map((o) => o.targetLink?.split('/').pop()).sort();
    };
    const gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100 });
    const ref = (name: string) => ({ backend: 'gce' as const, name, zone: ZONE });
    let asked: string[] = [];
    for (let i = 0; i < 50; i++) {
      asked = (await gce.preemptedAmong([ref('pa-1'), ref('pa-2')])).map((r) => r.name);
      if (asked.length > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(asked, ['pa-1'], 'pa-3 was preempted too, but not asked about');
    assert.deepEqual(await preemptedOps(operationsOn(['pa-1', 'pa-2'], ['compute.instances.preempted'])), ['pa-1'], 'the answer holds no other instance\'s operation');
    assert.deepEqual(await preemptedOps('operationType = "compute.instances.preempted"'), ['pa-1', 'pa-3']);
    await ops.close();
  });

  it('reads at most the configured number of older instances per listing, and marks the others unread until their turn', async () => {
    const owner = { 'sterna-run': 'wf-old2', 'sterna-exec': 'e1', 'sterna-attempt': '1' };
    await insert(vm('st-old2', { labels: owner, metadata: { items: [{ key: 'sterna-run-id', value: 'wf-old2' }] } }, OTHER_ZONE), OTHER_ZONE);
    const gce = new GceProvider({ project: PROJECT, prices: catalogPriceBook(), clientOptions: emu.clientOptions, pollIntervalMs: 100, metadataReadsPerListing: 1 });
    const olds = async () =>
      (await gce.listFleet())
        .filter((r) => r.ref.name.startsWith('st-old'))
        .map((r) => [r.ref.name, r.workflowId ?? (r.runUnread ? 'unread' : 'none')])
        .sort();
    const first = await olds();
    assert.equal(first.filter(([, id]) => id === 'unread').length, 1, JSON.stringify(first));
    assert.deepEqual(await olds(), [
      ['st-old', 'wf-old'],
      ['st-old2', 'wf-old2'],
    ]);
  });
});
