/**
 * Zone memory on the real stack (Temporal dev server, GCE emulator, real VM processes):
 * a run's stockout reaches the project's memory, and the next run skips that zone
 * without trying it; `sterna zones` shows it.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { readZoneMemory } from '../activities/zones/client';
import { rankOffers } from '../workflows/placement';
import { zoneMemoryWorkflowId } from '../workflows/zones/contract';
import { zonePrior, type ZoneMemory } from '../workflows/zones/memory';
import type { ZoneRow } from '../cli/zones';
import { eventually } from './helpers/processes';
import { exampleSpec, PROJECT, startStack, type Stack } from './helpers/stack';
import { testServerAddress } from './helpers/temporal';

const cli = join(__dirname, '..', 'cli', 'main.js');

async function sternaZones(stack: Stack, args: string[]): Promise<string> {
  const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: stack.env.namespace };
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [cli, 'zones', ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${String(err)}\n${stderr}`)) : resolve(stdout))),
  );
}

describe('zone memory across runs (dev server + emulator)', function () {
  this.timeout(300_000);
  let stack: Stack;

  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it('a run started right after another run\'s stockout in zone A skips A without trying it', async () => {
    // The zone every run tries first: the same pure ranking the workflow uses.
    const [preferred] = rankOffers(await stack.provider.findOffers({ accelerators: [{ type: 'nvidia-l4', count: 1 }], provisioningModels: ['SPOT'] }), [], {
      nowMs: Date.now(),
      cooldownSeconds: 1800,
      expectedHours: 1,
      models: ['SPOT'],
    });
    const zoneA = preferred.zone;
    const spec = exampleSpec({ resources: { accelerators: [{ type: preferred.accelerator, count: 1 }] } });
    const memoryId = zoneMemoryWorkflowId(stack.taskQueue, 'gce', PROJECT);
    const key = { zone: zoneA, accelerator: preferred.accelerator, model: 'SPOT' } as const;

    await stack.emulator.setSpotCapacity(zoneA, preferred.accelerator, 0);
    const first = await stack.start(spec);
    const told = await eventually('the first run\'s stockout in the zone memory', async () => {
      const memory = await readZoneMemory(stack.env.client, memoryId);
      return zonePrior(memory, key, Date.now()).lastStockoutAt ? memory : undefined;
    });
    // Zone A has capacity again: a run that tried it now would get it.
    await stack.emulator.setSpotCapacity(zoneA, preferred.accelerator, undefined);
    const second = await stack.start(spec);

    const [r1, r2] = await Promise.all([first.result(), second.result()]);
    assert.deepEqual({ zone: r1.attempts[0].zone, outcome: r1.attempts[0].outcome }, { zone: zoneA, outcome: 'stockout' });
    assert.equal(r1.attempts.at(-1)!.outcome, 'completed');
    assert.equal(zonePrior(told, key, Date.now()).inCooldown, true);
    // Every attempt is recorded before its create: none of the second run's was in A.
    assert.deepEqual(r2.attempts.filter((a) => a.zone === zoneA), [], `the second run tried ${r2.attempts.map((a) => a.zone).join(', ')}`);
    assert.equal(r2.attempts.length, 1);
    assert.equal(r2.attempts[0].outcome, 'completed');

    // The completed spot VMs told the memory how long they ran, without a preemption.
    const memory: ZoneMemory = await eventually('both runs\' lifetimes in the zone memory', async () => {
      const m = await readZoneMemory(stack.env.client, memoryId);
      return m.records.reduce((n, r) => n + r.lifetimes.length, 0) >= 2 ? m : undefined;
    });
    const ran = zonePrior(memory, { ...key, zone: r2.attempts[0].zone }, Date.now());
    assert.ok(ran.exposureHours > 0 && ran.medianSpotLifetimeHours! > 0, JSON.stringify(ran));
    assert.equal(ran.preemptionsPerHour, 0);

    const rows = JSON.parse(await sternaZones(stack, ['--project', PROJECT, '--task-queue', stack.taskQueue, '--json'])) as ZoneRow[];
    const a = rows.find((r) => r.zone === zoneA && r.accelerator === preferred.accelerator && r.model === 'SPOT');
    assert.deepEqual(Object.keys(a!).sort(), ['accelerator', 'inCooldown', 'lastStockout', 'medianSpotLifetimeHours', 'model', 'preemptionsPerHour', 'zone']);
    assert.equal(a!.inCooldown, true);
    assert.equal(a!.lastStockout, zonePrior(memory, key, Date.now()).lastStockoutAt);
  });
});
