/**
 * The fleet observer's planner, without a server: what it reads, what it tells runs,
 * and that the read budget holds for any fleet size.
 */
import { strict as assert } from 'node:assert';
import { absorbLook, emptyMemory, hasDraining, markSent, MIN_BUDGET_SCALE, nextBudgetScale, observationsDue, planFollow, planLook, readBucket, Tell, type DueObservation } from '../../activities/fleet/planner';
import type { FleetResource } from '../../activities/providers/provider';
import { carry, resume, type FleetMemory } from '../../activities/fleet/memory';
import { DEFAULT_FLEET_SETTINGS, resourceKey, type AgentValues, type FleetSettings, type Lifecycle } from '../../workflows/fleet/contract';

const settings: FleetSettings = DEFAULT_FLEET_SETTINGS;
const INTERVAL_MS = settings.intervalSeconds * 1000;
const T0 = Date.parse('2025-01-01T00:00:00Z');

function vm(i: number, lifecycle: FleetResource['lifecycle'] = 'running'): FleetResource {
  return {
    ref: { backend: 'gce', name: `st-run-${i}-a1`, zone: i % 2 ? 'us-central1-a' : 'us-central1-b' },
    owner: { run: `run-${i}`, execution: 'e'.repeat(14), attempt: 1 },
    workflowId: `run-${i}`,
    lifecycle,
  };
}

interface Agent {
  values: AgentValues;
  preempted?: boolean;
}

/** One look against a scripted fleet: the same sequence the activity runs. */
function look(memory: FleetMemory, listing: FleetResource[], nowMs: number, agents: (name: string) => Agent, opts: { settings?: FleetSettings } = {}) {
  const s = opts.settings ?? settings;
  const plan = planLook(memory, listing, nowMs, s);
  const reads = Object.fromEntries(plan.reads.map((ref) => [resourceKey(ref), agents(ref.name).values]));
  const checked = plan.preemptionChecks.map(resourceKey);
  const preempted = plan.preemptionChecks.filter((ref) => agents(ref.name).preempted).map(resourceKey);
  const absorbed = absorbLook(plan.memory, { reads, checked, preempted }, nowMs);
  const due = observationsDue(absorbed, nowMs, s);
  return { plan, due, memory: markSent(absorbed, due.map((d) => d.key), nowMs) };
}

const training = (step: number, checkpointStep?: number): Agent => ({
  values: { phase: 'training', step, ...(checkpointStep ? { checkpoint: { step: checkpointStep, sha256: 'c'.repeat(64), uri: `gs://b/step-${checkpointStep}` } } : {}) },
});

function only(due: DueObservation[]): DueObservation {
  assert.equal(due.length, 1, JSON.stringify(due));
  return due[0];
}

describe('fleet planner', () => {
  it('reads a new running resource at once and tells its run what the agent says', () => {
    const { plan, due } = look(emptyMemory(T0, settings), [vm(1)], T0, () => training(7, 5));
    assert.deepEqual(plan.reads.map((r) => r.name), ['st-run-1-a1']);
    const { workflowId, observation } = only(due);
    assert.equal(workflowId, 'run-1');
    assert.deepEqual(observation.owner, vm(1).owner);
    assert.deepEqual(observation.snapshot, { lifecycle: 'running', preempted: false, phase: 'training', step: 7, checkpoint: { step: 5, sha256: 'c'.repeat(64), uri: 'gs://b/step-5' } });
    assert.equal(observation.at, new Date(T0).toISOString());
  });

  it('between looks, reads a preempted VM that is still stopping until its agent has exited, and tells its run then', () => {
    const preempted = { ...vm(1, 'stopping'), preempted: true };
    let memory = look(emptyMemory(T0, settings), [vm(1), vm(2)], T0, () => training(10, 10)).memory;
    const notice = look(memory, [preempted, vm(2)], T0 + INTERVAL_MS, () => assert.fail('a stopping VM is not read in the look'));
    assert.equal(only(notice.due).observation.snapshot.preempted, true, 'the notice goes out at once');
    memory = notice.memory;
    assert.equal(hasDraining(memory), true);
    // One second on: only the draining VM is read; its agent is uploading, nothing to tell.
    const first = planFollow(memory, T0 + INTERVAL_MS + 1000, settings);
    assert.deepEqual(first.reads.map((r) => r.name), ['st-run-1-a1']);
    memory = absorbLook(first.memory, { reads: { [resourceKey(preempted.ref)]: { phase: 'uploading', step: 11 } }, checked: [], preempted: [] }, T0 + INTERVAL_MS + 1000);
    // Another second: it exited with its final checkpoint, and the run hears it.
    const second = planFollow(memory, T0 + INTERVAL_MS + 2000, settings);
    const exited = { phase: 'exited', exitCode: 143, step: 11, checkpoint: { step: 11, sha256: 'd'.repeat(64), uri: 'gs://b/step-11' } };
    memory = absorbLook(second.memory, { reads: { [resourceKey(preempted.ref)]: exited }, checked: [], preempted: [] }, T0 + INTERVAL_MS + 2000);
    const told = only(observationsDue(memory, T0 + INTERVAL_MS + 2000, settings));
    assert.deepEqual(told.observation.snapshot, { lifecycle: 'stopping', preempted: true, ...exited });
    assert.equal(hasDraining(memory), false, 'nothing more to wait for');
    assert.deepEqual(planFollow(memory, T0 + INTERVAL_MS + 3000, settings).reads, []);
  });

  it('tells a preemption before the checkpoints read with it, and can hold the checkpoints back while the attempt drains', () => {
    const memory = look(emptyMemory(T0, settings), [vm(1), vm(2), vm(3)], T0, () => training(10, 5)).memory;
    // A look later: runs 2 and 3 were read with new checkpoints, run 1's VM is stopping, preempted.
    const at = T0 + INTERVAL_MS;
    const keys = [vm(1), vm(2), vm(3)].map((v) => resourceKey(v.ref));
    const resources = { ...memory.resources };
    resources[keys[0]] = { ...resources[keys[0]], lifecycle: 'stopping', preempted: true };
    for (const key of keys.slice(1)) resources[key] = { ...resources[key], agent: training(70, 60).values, readAtMs: at };
    const seen: FleetMemory = { ...memory, resources };
    assert.equal(hasDraining(seen), true);
    const all = observationsDue(seen, at, settings);
    assert.deepEqual(all.map((d) => [d.workflowId, d.urgent]), [['run-1', true], ['run-2', false], ['run-3', false]], 'the preemption goes first');
    assert.deepEqual(observationsDue(seen, at, settings, Tell.Urgent).map((d) => d.workflowId), ['run-1'], 'progress can wait for the drain');
  });

  it('pays the follow-up reads from the same budget: none without tokens', () => {
    const preempted = { ...vm(1, 'stopping'), preempted: true };
    const memory = look(look(emptyMemory(T0, settings), [vm(1)], T0, () => training(10, 10)).memory, [preempted], T0 + INTERVAL_MS, () => training(10, 10)).memory;
    const broke = { ...memory, tokens: 0, tokensAtMs: T0 + INTERVAL_MS + 1000 };
    assert.deepEqual(planFollow(broke, T0 + INTERVAL_MS + 1000, settings).reads, []);
  });

  it('tells a pending resource at once without reading it', () => {
    const { plan, due } = look(emptyMemory(T0, settings), [vm(1, 'pending')], T0, () => assert.fail('nothing to read'));
    assert.equal(plan.reads.length, 0);
    assert.equal(only(due).observation.snapshot.lifecycle, 'pending');
  });

  it('says nothing while nothing changed, then a new checkpoint at once, a new step only every few minutes', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1)], T0, () => training(10, 5)).memory;
    let step = 10;
    const told: { atS: number; step?: number; checkpoint?: number }[] = [];
    for (let t = INTERVAL_MS; t <= 600_000; t += INTERVAL_MS) {
      step += 1;
      const checkpoint = t === 300_000 ? 300 : 5;
      const result = look(memory, [vm(1)], T0 + t, () => training(step, checkpoint === 300 || t > 300_000 ? 300 : 5));
      memory = result.memory;
      for (const d of result.due) told.push({ atS: t / 1000, step: d.observation.snapshot.step, checkpoint: d.observation.snapshot.checkpoint?.step });
    }
    // Reads about once a minute; news of the checkpoint on the read after it appeared.
    const checkpointTold = told.find((t) => t.checkpoint === 300);
    assert.ok(checkpointTold && checkpointTold.atS >= 300 && checkpointTold.atS <= 360, JSON.stringify(told));
    const stepOnly = told.filter((t) => t !== checkpointTold);
    for (let i = 1; i < stepOnly.length; i++) assert.ok(stepOnly[i].atS - stepOnly[i - 1].atS >= settings.progressSignalSeconds, JSON.stringify(told));
    assert.ok(stepOnly.length >= 2, 'progress is still reported now and then');
  });

  it('passes the agent\'s last printed line on with what it tells, and a new line alone is not news', () => {
    const printing = (line: string): Agent => ({ values: { phase: 'training', step: 10, lastLine: line } });
    let result = look(emptyMemory(T0, settings), [vm(1)], T0, () => printing('line 0'));
    assert.equal(only(result.due).observation.snapshot.lastLine, 'line 0');
    // A new line on every read, nothing else new: read about once a minute, told only when the run would otherwise look itself.
    const told: { atS: number; line?: string }[] = [];
    for (let t = INTERVAL_MS; t <= 600_000; t += INTERVAL_MS) {
      result = look(result.memory, [vm(1)], T0 + t, () => printing(`line ${t / 1000}`));
      for (const d of result.due) told.push({ atS: t / 1000, line: d.observation.snapshot.lastLine });
    }
    assert.ok(told.length >= 1 && told.length <= 2, JSON.stringify(told));
    for (const t of told) assert.ok(t.atS >= settings.maxSilenceSeconds, JSON.stringify(told));
    // What is told carries the line as last read, not a stale one.
    for (const t of told) assert.match(t.line ?? '', /^line \d+$/);
    assert.notEqual(told[0].line, 'line 0');
  });

  it('tells a quiet run at least every maxSilenceSeconds, so its own look is only a fallback', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1)], T0, () => training(10, 10)).memory;
    const toldAt: number[] = [];
    for (let t = INTERVAL_MS; t <= 20 * 60_000; t += INTERVAL_MS) {
      const result = look(memory, [vm(1)], T0 + t, () => training(10, 10));
      memory = result.memory;
      if (result.due.length) toldAt.push(t / 1000);
    }
    assert.deepEqual(toldAt, [300, 600, 900, 1200]);
  });

  it("reads a trainer again when, at the pace between its last two reads, it should be done: its run hears the exit within a look or two, not a minute", () => {
    // 10 steps a second from t = 0, exiting at 330 s (between two turns of the minute's cadence); the total known (as the example trainer reports it) or not.
    const trainer = (knowsTotal: boolean) => (t: number): Agent => {
      const step = Math.min(3300, Math.floor(t / 100));
      const total = knowsTotal ? { totalSteps: 3300 } : {};
      return { values: t >= 330_000 ? { phase: 'exited', step: 3300, exitCode: 0, ...total } : { phase: 'training', step, ...total } };
    };
    const exitHeard = (knowsTotal: boolean) => {
      let memory = emptyMemory(T0, settings);
      let reads = 0;
      for (let t = 0; t <= 600_000; t += INTERVAL_MS) {
        const result = look(memory, [vm(1)], T0 + t, () => trainer(knowsTotal)(t));
        memory = result.memory;
        reads += result.plan.reads.length;
        if (result.due.some((d) => d.observation.snapshot.exitCode === 0)) return { atS: t / 1000, reads };
      }
      return { atS: Infinity, reads };
    };
    const knowing = exitHeard(true);
    const blind = exitHeard(false);
    assert.ok(knowing.atS - 330 <= 2 * settings.intervalSeconds, `heard the exit ${knowing.atS - 330} s after it`);
    assert.ok(knowing.reads <= blind.reads + 3, `${knowing.reads} reads against ${blind.reads} at the regular cadence`);
    assert.ok(blind.atS - 330 > 2 * settings.intervalSeconds && blind.atS - 330 <= settings.progressReadSeconds + settings.intervalSeconds, `without a total, at the cadence: ${blind.atS - 330} s`);
  });

  it('leaves a stalled trainer to the regular cadence: no pace, no early read', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1)], T0, () => ({ values: { phase: 'training', step: 100, totalSteps: 200 } })).memory;
    let reads = 0;
    for (let t = INTERVAL_MS; t <= 600_000; t += INTERVAL_MS) {
      const result = look(memory, [vm(1)], T0 + t, () => ({ values: { phase: 'training', step: 100, totalSteps: 200 } }));
      memory = result.memory;
      reads += result.plan.reads.length;
    }
    assert.ok(reads <= 10, `${reads} reads in 10 minutes`);
  });

  it('reads a small fleet about once a minute each, spread over the minute', () => {
    const fleet = Array.from({ length: 20 }, (_, i) => vm(i));
    let memory = emptyMemory(T0, settings);
    const readsPerVm = new Map<string, number>();
    const readsPerLook: number[] = [];
    for (let t = 0; t < 600_000; t += INTERVAL_MS) {
      const result = look(memory, fleet, T0 + t, () => training(1));
      memory = result.memory;
      readsPerLook.push(result.plan.reads.length);
      for (const r of result.plan.reads) readsPerVm.set(r.name, (readsPerVm.get(r.name) ?? 0) + 1);
    }
    for (const [name, reads] of readsPerVm) assert.ok(reads >= 9 && reads <= 11, `${name} read ${reads} times in 10 minutes`);
    // After the first look (everything is new), each look reads its share: 20 VMs x 5 s / 60 s.
    assert.ok(Math.max(...readsPerLook.slice(1)) <= 2, `reads per look: ${readsPerLook.join(',')}`);
  });

  it('holds an ended attempt back until its final read, which goes before any other', () => {
    const fleet = Array.from({ length: 200 }, (_, i) => vm(i));
    const tight = { ...settings, readsPerMinute: 60, burstSeconds: 10 };
    let memory = emptyMemory(T0, tight);
    memory = { ...memory, tokens: 0 };
    // Everything is known and read once already.
    for (const r of fleet) memory.resources[resourceKey(r.ref)] = { ref: r.ref, owner: r.owner, workflowId: r.workflowId, lifecycle: 'running', preempted: false, agent: training(10, 10).values, readAtMs: T0, absentLooks: 0, told: { lifecycle: 'running', preempted: false, phase: 'training', step: 10, checkpointStep: 10, atMs: T0 } };
    const ended = fleet.map((r, i) => (i === 42 ? { ...r, lifecycle: 'terminated' as const } : r));
    const agents = (name: string): Agent => (name === 'st-run-42-a1' ? { values: { phase: 'exited', step: 55, exitCode: 143, checkpoint: { step: 50, sha256: 'd'.repeat(64), uri: 'gs://b/step-50' } }, preempted: true } : training(10, 10));
    // No token yet: the change is seen, the preemption checked, but nothing is told.
    const first = look(memory, ended, T0 + 100, agents, { settings: tight });
    assert.equal(first.plan.reads.length, 0);
    assert.deepEqual(first.plan.preemptionChecks.map((r) => r.name), ['st-run-42-a1']);
    assert.deepEqual(first.due, []);
    // The next token goes to the ended attempt, not to the 199 others that are just as stale.
    const second = look(first.memory, ended, T0 + 100 + 2 * INTERVAL_MS, agents, { settings: tight });
    assert.deepEqual(second.plan.reads.map((r) => r.name), ['st-run-42-a1']);
    const { observation } = only(second.due);
    assert.deepEqual(observation.snapshot, { lifecycle: 'terminated', preempted: true, phase: 'exited', step: 55, exitCode: 143, checkpoint: { step: 50, sha256: 'd'.repeat(64), uri: 'gs://b/step-50' } });
  });

  it('tells a stopping resource at once, preempted or not, before reading it', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1), vm(2)], T0, () => training(10)).memory;
    memory = { ...memory, tokens: 0, tokensAtMs: T0 + INTERVAL_MS };
    const stopping = [vm(1, 'stopping'), vm(2, 'stopping')];
    const { due, plan } = look(memory, stopping, T0 + INTERVAL_MS, (name) => ({ ...training(10), preempted: name === 'st-run-1-a1' }));
    assert.equal(plan.reads.length, 0);
    const byRun = Object.fromEntries(due.map((d) => [d.workflowId, d.observation.snapshot]));
    assert.deepEqual(byRun['run-1'], { lifecycle: 'stopping', preempted: true, phase: 'training', step: 10 });
    assert.deepEqual(byRun['run-2'], { lifecycle: 'stopping', preempted: false, phase: 'training', step: 10 });
  });

  it('holds a stop back while the preemption check has not answered', () => {
    const memory = look(emptyMemory(T0, settings), [vm(1)], T0, () => training(10)).memory;
    const plan = planLook(memory, [vm(1, 'stopping')], T0 + INTERVAL_MS, settings);
    assert.deepEqual(plan.preemptionChecks.map((r) => r.name), ['st-run-1-a1']);
    // The check failed: nothing is told, and it is asked again next look.
    const absorbed = absorbLook(plan.memory, { reads: {}, checked: [], preempted: [] }, T0 + INTERVAL_MS);
    assert.deepEqual(observationsDue(absorbed, T0 + INTERVAL_MS, settings), []);
    assert.equal(planLook(absorbed, [vm(1, 'stopping')], T0 + 2 * INTERVAL_MS, settings).preemptionChecks.length, 1);
  });

  it('calls a resource gone after two listings without it, tells its run once, then forgets it', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1), vm(2)], T0, () => training(10)).memory;
    const once = look(memory, [vm(2)], T0 + INTERVAL_MS, () => training(10));
    assert.deepEqual(once.due, []);
    assert.equal(once.memory.resources[resourceKey(vm(1).ref)].lifecycle, 'running');
    const twice = look(once.memory, [vm(2)], T0 + 2 * INTERVAL_MS, () => training(10));
    const { workflowId, observation } = only(twice.due);
    assert.equal(workflowId, 'run-1');
    assert.equal(observation.snapshot.lifecycle, 'gone');
    // A resource that vanished while running may have been preempted with a DELETE action.
    assert.deepEqual(twice.plan.preemptionChecks.map((r) => r.name), ['st-run-1-a1']);
    memory = twice.memory;
    assert.equal(memory.resources[resourceKey(vm(1).ref)], undefined);
    assert.deepEqual(look(memory, [vm(2)], T0 + 3 * INTERVAL_MS, () => training(10)).due, []);
  });

  it('never tells a run about a resource that does not name one, and never reads it', () => {
    const anonymous = { ...vm(1), workflowId: undefined };
    const { plan, due } = look(emptyMemory(T0, settings), [anonymous], T0, () => training(10));
    assert.deepEqual(plan.reads, []);
    assert.deepEqual(due, []);
  });

  it('takes agent values that come with the listing (GKE) without spending reads', () => {
    const listed = { ...vm(1, 'terminated'), agent: { phase: 'exited', exitCode: 0, step: 400 }, preempted: false };
    const { plan, due } = look(emptyMemory(T0, settings), [listed], T0, () => ({ values: {}, preempted: false }));
    assert.deepEqual(plan.reads, []);
    assert.deepEqual(only(due).observation.snapshot, { lifecycle: 'terminated', preempted: false, phase: 'exited', exitCode: 0, step: 400 });
  });

  it('reads a wave of 100 ended attempts in one look while 2,000 VMs use the whole budget', () => {
    const N = 2000;
    let memory = emptyMemory(T0, settings);
    const healthy = Array.from({ length: N }, (_, i) => vm(i));
    let t = 0;
    for (; t < 6 * 60_000; t += INTERVAL_MS) memory = look(memory, healthy, T0 + t, () => training(t)).memory;
    const wave = healthy.map((r, i) => (i < 100 ? { ...r, lifecycle: 'terminated' as const } : r));
    const result = look(memory, wave, T0 + t, (name) => (Number(/st-run-(\d+)-a1/.exec(name)![1]) < 100 ? { values: { phase: 'exited', exitCode: 143 }, preempted: true } : training(t)));
    const ended = result.due.filter((d) => d.observation.snapshot.lifecycle === 'terminated');
    assert.equal(ended.length, 100, `${ended.length} of 100 ended attempts told in the first look`);
    assert.ok(ended.every((d) => d.observation.snapshot.preempted && d.observation.snapshot.exitCode === 143));
  });

  it('never spends more than the read budget in any minute, for a fleet of 2,000 with churn, and reads every VM in turn', () => {
    const N = 2000;
    const budget = settings.readsPerMinute;
    const lifecycles: Lifecycle[] = Array.from({ length: N }, () => 'running');
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    let memory = emptyMemory(T0, settings);
    const readTimes: number[] = [];
    const lastRead = new Map<number, number>();
    let maxGapMs = 0;
    for (let t = 0; t <= 20 * 60_000; t += INTERVAL_MS) {
      // About 1% of the fleet changes status each minute: preemptions and replacements.
      for (let i = 0; i < N; i++) {
        if (random() < 0.01 / 12) lifecycles[i] = lifecycles[i] === 'running' ? 'stopping' : lifecycles[i] === 'stopping' ? 'terminated' : 'running';
      }
      const listing = lifecycles.map((l, i) => vm(i, l as FleetResource['lifecycle']));
      const result = look(memory, listing, T0 + t, () => ({ values: { phase: 'training', step: t }, preempted: true }));
      memory = result.memory;
      for (const ref of result.plan.reads) {
        readTimes.push(t);
        const i = Number(/st-run-(\d+)-a1/.exec(ref.name)![1]);
        lastRead.set(i, t);
      }
      if (t >= 5 * 60_000) {
        for (let i = 0; i < N; i++) if (lifecycles[i] === 'running') maxGapMs = Math.max(maxGapMs, t - (lastRead.get(i) ?? 0));
      }
    }
    let worstMinute = 0;
    for (let start = 0; start <= 19 * 60_000; start += INTERVAL_MS) {
      worstMinute = Math.max(worstMinute, readTimes.filter((t) => t >= start && t < start + 60_000).length);
    }
    assert.ok(worstMinute <= budget, `${worstMinute} reads in one minute, budget ${budget}`);
    assert.ok(worstMinute >= budget * 0.9, `the budget is used when the fleet needs it (${worstMinute} of ${budget})`);
    // 2,000 VMs at about (750 - 125) reads a minute: each read at least every ~3.2 minutes, plus the changes.
    const bucket = readBucket(settings);
    const expectedGapMs = (N / (bucket.refillPerMs * 60_000)) * 60_000;
    assert.ok(maxGapMs <= expectedGapMs * 1.3, `a running VM went ${maxGapMs / 1000} s unread (expected about ${expectedGapMs / 1000} s)`);
  });
});

  it('gives way when the project refuses calls for its rate quota: halves its budget at each refusal, then regains it over minutes', () => {
    const fleet = Array.from({ length: 2000 }, (_, i) => vm(i));
    const readsInMinute = (from: number, refusedUntil: number, memory: FleetMemory) => {
      let reads = 0;
      for (let t = from; t < from + 60_000; t += INTERVAL_MS) {
        const plan = planLook(memory, fleet, T0 + t, settings, t < refusedUntil);
        reads += plan.reads.length;
        memory = absorbLook(plan.memory, { reads: Object.fromEntries(plan.reads.map((r) => [resourceKey(r), training(10).values])), checked: [], preempted: [] }, T0 + t);
      }
      return { reads, memory };
    };
    // A fleet of 2,000 spends the whole budget, minute after minute (the burst's share aside).
    const full = readBucket(settings).refillPerMs * 60_000;
    let minute = readsInMinute(0, 0, emptyMemory(T0, settings));
    minute = readsInMinute(60_000, 0, minute.memory);
    assert.ok(minute.reads >= 0.95 * full, `${minute.reads} reads at full budget`);
    // Refused in the first 20 s of a minute (four looks): the budget is down to 1/16, and the minute reads at most that share.
    minute = readsInMinute(120_000, 140_000, minute.memory);
    assert.ok(Math.abs(minute.memory.budgetScale - (1 / 16 + (40_000 / 60_000) * 0.125)) < 1e-9, `budget share ${minute.memory.budgetScale}`);
    assert.ok(minute.reads <= settings.readsPerMinute / 8, `${minute.reads} reads in the refused minute`);
    // Without refusals it regains the whole budget within 8 minutes.
    for (let m = 3; m < 11; m++) minute = readsInMinute(m * 60_000, 0, minute.memory);
    assert.equal(minute.memory.budgetScale, 1);
    assert.ok(minute.reads >= 0.95 * full, `${minute.reads} reads once regained`);
  });

  it('never shrinks below a sixteenth of its budget, and carries its share through continue-as-new', () => {
    let scale = 1;
    for (let i = 0; i < 10; i++) scale = nextBudgetScale(scale, true, INTERVAL_MS);
    assert.equal(scale, MIN_BUDGET_SCALE);
    const plan = planLook(emptyMemory(T0, settings), [vm(1)], T0 + INTERVAL_MS, settings, true);
    assert.deepEqual(plan.reads, [], 'a refusal leaves no token to spend in the same look');
    assert.equal(resume(carry(plan.memory), 'gce').budgetScale, 0.5);
    const { budgetScale: _dropped, ...older } = carry(plan.memory);
    assert.equal(resume(older, 'gce').budgetScale, 1, 'a memory carried before the budget could shrink stands at the full budget');
  });

describe('fleet memory, as carried between watchFleet calls', () => {
  it('keeps what each run was told, so a resumed observer tells nothing twice', () => {
    let memory = look(emptyMemory(T0, settings), [vm(1), vm(2, 'pending')], T0, () => training(10, 10)).memory;
    memory = resume(JSON.parse(JSON.stringify(carry(memory))), 'gce');
    assert.deepEqual(memory.resources[resourceKey(vm(1).ref)].told, { lifecycle: 'running', preempted: false, phase: 'training', checkpointStep: 10, exitCode: undefined, step: 10, atMs: T0 });
    assert.deepEqual(memory.resources[resourceKey(vm(1).ref)].owner, vm(1).owner);
    // The agent's values were dropped in transit; the next read finds nothing new, so nothing is told.
    const next = look(memory, [vm(1), vm(2, 'pending')], T0 + 60_000, () => training(10, 10));
    assert.deepEqual(next.plan.reads.map((r) => r.name), ['st-run-1-a1']);
    assert.deepEqual(next.due, []);
  });

  it('tells nothing to a run whose resource a resumed observer has not read again: a dropped checkpoint or step is unknown, not news', () => {
    const fleet = [vm(1), vm(2)];
    const told = look(emptyMemory(T0, settings), fleet, T0, () => training(10, 10)).memory;
    let memory = resume(JSON.parse(JSON.stringify(carry(told))), 'gce');
    // Looks after the resume, before either is read again: no signal (every watchFleet call
    // used to re-tell the whole fleet here, without its checkpoints).
    for (let t = INTERVAL_MS; t < settings.progressSignalSeconds * 1000 + INTERVAL_MS; t += INTERVAL_MS) {
      const next = look(memory, fleet, T0 + t, () => training(10, 10), { settings: { ...settings, readsPerMinute: 0 } });
      assert.deepEqual(next.plan.reads, []);
      assert.deepEqual(next.due, [], `nothing to tell ${t / 1000} s after the resume`);
      memory = next.memory;
    }
    // A silence still gets its signal, and what the run was told of its checkpoint stays,
    // so the read after it finds nothing new to tell.
    const quiet = look(memory, fleet, T0 + settings.maxSilenceSeconds * 1000, () => training(10, 10), { settings: { ...settings, readsPerMinute: 0 } });
    assert.deepEqual(quiet.due.map((d) => d.workflowId).sort(), ['run-1', 'run-2']);
    assert.equal(quiet.memory.resources[resourceKey(vm(1).ref)].told?.checkpointStep, 10);
    memory = quiet.memory;
    const readAgain = new Set<string>();
    let t = settings.maxSilenceSeconds * 1000;
    while (readAgain.size < fleet.length && t < settings.maxSilenceSeconds * 1000 + 180_000) {
      t += INTERVAL_MS;
      const next = look(memory, fleet, T0 + t, () => training(10, 10));
      next.plan.reads.forEach((r) => readAgain.add(r.name));
      assert.deepEqual(next.due, [], `the read ${t / 1000} s after the resume finds nothing new`);
      memory = next.memory;
    }
    assert.equal(readAgain.size, fleet.length, 'both read again within three minutes');
    const newer = look(memory, fleet, T0 + t + 60_000, () => training(20, 20));
    assert.deepEqual(newer.due.map((d) => d.observation.snapshot.checkpoint?.step), newer.plan.reads.map(() => 20), 'a new checkpoint is news again');
    assert.ok(newer.due.length > 0);
  });

  it("keeps when a trainer should be done, so a resumed observer still reads it then", () => {
    const entry = { ...look(emptyMemory(T0, settings), [vm(1)], T0, () => training(10)).memory.resources[resourceKey(vm(1).ref)], endAtMs: T0 + 90_000 };
    const memory: FleetMemory = { resources: { [resourceKey(vm(1).ref)]: entry }, tokens: 5, tokensAtMs: T0, budgetScale: 1 };
    assert.equal(resume(JSON.parse(JSON.stringify(carry(memory))), 'gce').resources[resourceKey(vm(1).ref)].endAtMs, T0 + 90_000);
  });

  it('keeps a preemption and a pending preemption check', () => {
    const first = look(emptyMemory(T0, settings), [vm(1), vm(2)], T0, () => training(10)).memory;
    const plan = planLook(first, [vm(1, 'stopping'), vm(2, 'stopping')], T0 + INTERVAL_MS, settings);
    // vm 1's check answered (preempted); vm 2's failed.
    const absorbed = absorbLook(plan.memory, { reads: {}, checked: [resourceKey(vm(1).ref)], preempted: [resourceKey(vm(1).ref)] }, T0 + INTERVAL_MS);
    const resumed = resume(carry(absorbed), 'gce');
    assert.equal(resumed.resources[resourceKey(vm(1).ref)].preempted, true);
    assert.equal(resumed.resources[resourceKey(vm(1).ref)].preemptionCheckDue, undefined);
    assert.equal(resumed.resources[resourceKey(vm(2).ref)].preempted, false);
    assert.equal(resumed.resources[resourceKey(vm(2).ref)].preemptionCheckDue, true);
  });

  it('marks news that was not delivered for a fresh read, since its values are not carried', () => {
    const plan = planLook(emptyMemory(T0, settings), [vm(1, 'terminated'), vm(2)], T0, settings);
    const absorbed = absorbLook(plan.memory, { reads: { [resourceKey(vm(1).ref)]: { phase: 'exited', exitCode: 0 }, [resourceKey(vm(2).ref)]: { phase: 'training' } }, checked: [resourceKey(vm(1).ref)], preempted: [] }, T0);
    // The signals failed: nothing was marked told.
    const resumed = resume(carry(absorbed), 'gce');
    assert.equal(resumed.resources[resourceKey(vm(1).ref)].readDue, 'ended');
    assert.equal(resumed.resources[resourceKey(vm(2).ref)].readDue, 'changed');
    assert.deepEqual(observationsDue(resumed, T0, settings), [], 'held until read again');
  });

  it('carries 2,000 resources in well under Temporal\'s 2 MB payload limit', () => {
    const fleet = Array.from({ length: 2000 }, (_, i) => ({ ...vm(i), workflowId: `team-a/training-run-${i}`, ref: { ...vm(i).ref, name: `st-team-a-training-run-${i}-abcdefg-1234567-a1` } }));
    const agent = (): Agent => ({ values: { phase: 'training', step: 123456, checkpoint: { step: 123000, sha256: 'a'.repeat(64), uri: 'gs://my-bucket/checkpoints/team-a-training-run/step-123000.pt' } } });
    let memory = emptyMemory(T0, settings);
    for (let t = 0; t < 300_000; t += INTERVAL_MS) memory = look(memory, fleet, T0 + t, agent).memory;
    const bytes = JSON.stringify(carry(memory)).length;
    assert.ok(bytes < 600_000, `${bytes} bytes for 2,000 resources`);
    assert.equal(Object.keys(resume(carry(memory), 'gce').resources).length, 2000);
  });
});

