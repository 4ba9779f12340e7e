/**
 * The GCE provider's Compute clients are the package's own, built on the descriptors
 * their five services reach: every reference in that cut resolves, each service and
 * its types are described exactly as in the package's whole set, and a VM reads the same
 * through them as through the package's stock client.
 */
import { strict as assert } from 'node:assert';
import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import * as gax from 'google-gax';
import { computeClients, computeDescriptors, COMPUTE_SERVICES, packageDescriptors, READ_TIMEOUT_MS, WAIT_TIMEOUT_MS, type ComputeClients } from '../../activities/providers/gce-clients';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';

const V1 = 'google.cloud.compute.v1';

function v1Types(json: gax.protobuf.INamespace): Record<string, unknown> {
  type Nested = { nested?: Record<string, Nested> };
  return (json as Nested).nested!.google.nested!.cloud.nested!.compute.nested!.v1.nested!;
}

/** A type and every message or enum its fields name, as JSON, by full name. */
function closure(root: gax.protobuf.Root, name: string, seen = new Map<string, unknown>()): Map<string, unknown> {
  if (seen.has(name)) return seen;
  const type = root.lookupTypeOrEnum(name);
  // As plain JSON: protobufjs shares some option objects between descriptors.
  seen.set(name, JSON.parse(JSON.stringify(type.toJSON())));
  if (type instanceof gax.protobuf.Type) for (const field of type.fieldsArray) if (field.resolvedType) closure(root, field.resolvedType.fullName.slice(1), seen);
  return seen;
}

describe('GCE provider: Compute clients on the descriptors their services reach', function () {
  this.timeout(60_000);
  it('resolves every reference of the cut, and keeps a small part of Compute v1', () => {
    const cut = computeDescriptors();
    gax.protobuf.Root.fromJSON(cut).resolveAll();
    const kept = Object.keys(v1Types(cut));
    assert.ok(kept.includes('Instance') && kept.includes('Operation') && kept.includes('GuestAttributes'), 'the types the provider reads are kept');
    assert.ok(kept.length < 300, `the services reach ${kept.length} types, not all 2,000 of v1`);
  });

  it('a cut that missed a type does not resolve: the check above can fail', () => {
    const cut = computeDescriptors();
    delete v1Types(cut).Scheduling;
    assert.throws(() => gax.protobuf.Root.fromJSON(cut).resolveAll(), /Scheduling/);
  });

  it('describes each service, its methods and every type they reach exactly as the whole set does', () => {
    const all = gax.protobuf.Root.fromJSON(packageDescriptors());
    const cut = gax.protobuf.Root.fromJSON(computeDescriptors());
    for (const name of COMPUTE_SERVICES) {
      const [a, b] = [all.lookupService(`${V1}.${name}`), cut.lookupService(`${V1}.${name}`)];
      assert.deepEqual(JSON.parse(JSON.stringify(b.toJSON())), JSON.parse(JSON.stringify(a.toJSON())), name);
      for (const method of a.methodsArray) {
        for (const typeName of [method.requestType, method.responseType]) {
          const full = `${V1}.${typeName}`;
          assert.deepEqual(Object.fromEntries(closure(cut, full)), Object.fromEntries(closure(all, full)), `${name}.${method.name}: ${typeName}`);
        }
      }
    }
  });

  describe('through the emulator', () => {
    let emulator: TestEmulator;
    let clients: ComputeClients;
    before(async () => {
      emulator = await startTestEmulator({});
      clients = computeClients(emulator.clientOptions);
    });
    after(async () => {
      await Promise.all(Object.values(clients ?? {}).map((c: { close(): Promise<void> }) => c.close()));
      await emulator?.stop();
    });

    it('reads a VM, its insert operation and the fleet listing as the stock client does', async () => {
      const project = 'cut-clients';
      const zone = 'us-central1-a';
      const stock = new InstancesClient(emulator.clientOptions);
      const stockOps = new ZoneOperationsClient(emulator.clientOptions);
      try {
        const [lro] = await stock.insert({
          project,
          zone,
          instanceResource: {
            name: 'vm-cut',
            machineType: `zones/${zone}/machineTypes/e2-standard-2`,
            disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }],
            labels: { sterna: 'yes', run: 'r1' },
            scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE' },
            metadata: { items: [{ key: 'k', value: 'v' }] },
          },
        });
        const operation = lro.latestResponse.name as string;
        const [[viaStock], [viaCut]] = await Promise.all([stockOps.get({ project, zone, operation }), clients.operations.get({ project, zone, operation })]);
        assert.deepEqual(viaCut, viaStock);
        const [[vmStock], [vmCut]] = await Promise.all([stock.get({ project, zone, instance: 'vm-cut' }), clients.instances.get({ project, zone, instance: 'vm-cut' })]);
        assert.equal(vmCut.labels?.run, 'r1');
        assert.deepEqual(vmCut, vmStock);
        const listed: string[] = [];
        for await (const [scope, page] of clients.instances.aggregatedListAsync({ project, filter: 'labels.sterna=yes' }, { autoPaginate: false })) {
          for (const vm of page.instances ?? []) listed.push(`${scope}/${vm.name}`);
        }
        assert.deepEqual(listed, [`zones/${zone}/vm-cut`]);
      } finally {
        await stock.close();
        await stockOps.close();
      }
    });

    it("arms each call's deadline at Sterna's own wait for it, not the package's 600 s (google-gax holds the answer until then)", async () => {
      const project = 'cut-clients';
      const zone = 'us-central1-a';
      const armed: number[] = [];
      const timeout = AbortSignal.timeout.bind(AbortSignal);
      AbortSignal.timeout = (ms: number) => {
        armed.push(ms);
        return timeout(ms);
      };
      const armedBy = async (call: () => Promise<unknown>) => {
        armed.length = 0;
        await call();
        return [...armed];
      };
      try {
        const [read] = await armedBy(() => clients.regions.get({ project, region: 'us-central1' }));
        const [list] = await armedBy(() => clients.zones.list({ project }));
        const [insert] = await armedBy(() =>
          clients.instances.insert(
            { project, zone, instanceResource: { name: 'vm-deadline', machineType: `zones/${zone}/machineTypes/e2-standard-2`, disks: [{ boot: true, initializeParams: { sourceImage: 'img' } }] } },
            { timeout: 95_000 },
          ),
        );
        const [[op]] = await clients.operations.list({ project, zone });
        const [wait] = await armedBy(() => clients.operations.wait({ project, zone, operation: op.name! }));
        // The signal is armed with what is left of the deadline when the request is sent.
        const near = (ms: number | undefined, deadline: number, what: string) => assert.ok(ms !== undefined && ms <= deadline && ms > deadline - 5_000, `${what}: armed ${ms} ms, deadline ${deadline}`);
        near(read, READ_TIMEOUT_MS, 'regions.get');
        near(list, READ_TIMEOUT_MS, 'zones.list');
        near(insert, 95_000, "instances.insert with the call's own timeout");
        near(wait, WAIT_TIMEOUT_MS, 'zoneOperations.wait');
      } finally {
        AbortSignal.timeout = timeout;
      }
    });
  });
});
