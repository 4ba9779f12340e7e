/**
 * The flex-start (DWS) tier of the policy, server-less: sterna weighs flex-start against
 * waiting for spot and against on-demand by expected cost under the deadline
 * (workflows/policy/flex-tier.ts); the benchmark's optimum with the tier stays exact and a
 * lower bound; the workflow's auto inputs give the benchmark's decisions; and a small
 * slice of the tier's table (bench/README.md "The flex-start tier").
 */
import { strict as assert } from 'node:assert';
import { decideAuto, type AutoInputs, type AutoState } from '../workflows/auto-policy';
import type { ZoneEvent } from '../workflows/placement';
import { type Action, type Observation, type OnlinePolicy, type PolicyState, type ZoneObservation, decide, initialState, sternaPolicy } from '../workflows/policy';
import { withSafetyNet } from '../workflows/policy/deadline';
import { flexUsd, grantChance, onDemandUsd, withFlexTier } from '../workflows/policy/flex-tier';
import type { Offer } from '../workflows/types';
import { seededRandom } from '../workflows/random';
import { bruteForce } from './helpers/brute-force';
import { DEFAULT_FLEX, catalogFlexRatio, flexTierFor, withFlex } from '../bench/flex';
import { optimal } from '../bench/optimal';
import { OPTIMAL_NO_FLEX, STERNA_NO_FLEX, onlinePolicies } from '../bench/policies';
import { type Problem, windowOf } from '../bench/problem';
import { Memory, runBench } from '../bench/run';
import { evaluateSchedule } from '../bench/schedule';
import { View, simulate } from '../bench/simulate';
import { loadTrace } from '../bench/trace';
import { windowStarts } from '../bench/windows';

const TRACE = `${__dirname}/../../../shared/traces/aws-gpu-2zone-2022-10.json`;
const HOUR_MS = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00Z');

function randomFlexProblem(random: () => number, zones: number, deadlineTicks: number, workTicks: number, changeoverTicks: number): Problem {
  const names = Array.from({ length: zones }, (_, z) => `zone-${z}`);
  const onDemandPrice = names.map(() => 2 + 2 * random());
  return {
    zones: names,
    available: names.map(() => Uint8Array.from({ length: deadlineTicks }, () => (random() < 0.5 ? 1 : 0))),
    spotPrice: names.map(() => Float64Array.from({ length: deadlineTicks }, () => 0.5 + random())),
    onDemandPrice,
    tickHours: 0.25,
    deadlineTicks,
    workTicks,
    changeoverTicks,
    flex: {
      price: onDemandPrice.map((od) => od * (0.4 + 0.4 * random())),
      grant: names.map(() => Uint8Array.from({ length: deadlineTicks }, () => (random() < 0.35 ? 1 : 0))),
      meanWaitHours: names.map(() => 0.5),
      maxWaitTicks: 3,
      maxWaitHours: 0.75,
      maxRunHours: 168,
    },
  };
}

function zone(name: string, over: Partial<ZoneObservation> = {}): ZoneObservation {
  return { zone: name, spotAvailable: false, spotPrice: 1, onDemandPrice: 3, flexPrice: 1.5, flexWaitHours: 0.25, ...over };
}

/** Idle in an outage of every zone (seen down), `slack` hours to spare over 10 h of work. */
function outage(slack: number, over: Partial<Observation> = {}): Observation {
  return {
    nowHours: 0,
    remainingWorkHours: 10,
    hoursUntilDeadline: 10 + slack,
    changeoverHours: 0.1,
    stepHours: 0.25,
    current: { kind: 'idle' },
    changeoverRemainingHours: 0,
    zones: [zone('a'), zone('b', { flexWaitHours: 0.5 })],
    flexStart: { maxWaitHours: 0.5, maxRunHours: 168 },
    ...over,
  };
}

describe('the flex-start tier of the policy (pure)', () => {
  it('waits for spot while a request a step later still keeps the deadline, then asks for flex-start where it is expected cheapest', () => {
    // Fits now: 0.95 - 0.5 window - 0.25 step >= 0.1 changeover; a step later it would not.
    const early = decide(initialState(), outage(2.5));
    assert.equal(early.action.kind, 'idle', 'slack to spare: waiting is free and keeps both options');
    const last = decide(initialState(), outage(0.95));
    assert.deepEqual(last.action, { kind: 'flex-start', zone: 'a' }, 'the shorter expected wait wins at equal prices');
  });

  it('never asks when a full wait that ends empty-handed would leave no time for on-demand', () => {
    const tight = decide(initialState(), outage(0.8));
    assert.notEqual(tight.action.kind, 'flex-start');
  });

  it('does not ask where flex-start costs what on-demand does (G2)', () => {
    const g2 = decide(initialState(), outage(0.95, { zones: [zone('a', { flexPrice: 3 }), zone('b', { flexPrice: 3 })] }));
    assert.notEqual(g2.action.kind, 'flex-start');
  });

  it('weighs the expected wait at the slack\'s price: a long likely-failing wait loses to on-demand, a short one wins', () => {
    const obs = outage(2, { remainingWorkHours: 1, hoursUntilDeadline: 3 });
    const od = obs.zones[0];
    const onDemand: Action = { kind: 'on-demand', zone: 'a' };
    const choice = (flexWaitHours: number) =>
      withFlexTier({ obs: { ...obs, zones: [zone('a', { flexWaitHours })] }, action: onDemand, slackPrice: 3, onDemand: od, waitingUsd: () => Infinity, spotUsd: () => Infinity });
    assert.ok(grantChance(0.5, 10) < 0.1);
    assert.deepEqual(choice(10), onDemand, `flex ${flexUsd({ ...obs, zones: [zone('a', { flexWaitHours: 10 })] }, zone('a', { flexWaitHours: 10 }), od, 3)} vs on-demand ${onDemandUsd(obs, od, 3)}`);
    assert.deepEqual(choice(0.05), { kind: 'flex-start', zone: 'a' });
  });

  it('counts the 7-day cap: each further week is a new start and a new wait', () => {
    const obs = outage(100, { remainingWorkHours: 167 });
    const z = zone('a');
    const within = flexUsd(obs, z, z, 1);
    const beyond = flexUsd({ ...obs, remainingWorkHours: 169 }, z, z, 1);
    // Two more hours of work at the flex price, plus one more start: its changeover (paid and in slack) and its wait in slack.
    const oneMoreStart = 1.5 * 0.1 + 1 * 0.1;
    assert.ok(beyond - within > 2 * 1.5 + oneMoreStart, `${beyond} - ${within}`);
  });

  it('keeps a running flex-start VM through the safety net: it is never preempted', () => {
    const obs = outage(0.05, { current: { kind: 'flex-start', zone: 'a' } });
    assert.deepEqual(withSafetyNet(obs, obs.current), obs.current);
    assert.deepEqual(decide(initialState(), obs).action, obs.current);
  });
});

describe('the flex-start tier of the benchmark', () => {
  it('finds the same optimum as brute force with flex-start in the window, entered only at a grant', () => {
    const random = seededRandom(13);
    for (let i = 0; i < 30; i++) {
      const zones = 1 + (i % 2);
      const p = randomFlexProblem(random, zones, zones === 1 ? 8 : 6, 2 + (i % 3), i % 3);
      const expected = bruteForce(p);
      const got = optimal(p);
      if (!Number.isFinite(expected)) {
        assert.equal(got, undefined, `case ${i}: infeasible`);
        continue;
      }
      assert.ok(got !== undefined && Math.abs(got.cost - expected) < 1e-9, `case ${i}: dp ${got?.cost} vs brute ${expected}`);
      const replay = evaluateSchedule(p, got.schedule);
      assert.ok(Math.abs(replay.cost - got.cost) < 1e-9 && replay.deadlineMet, `case ${i}: ${got.schedule}`);
    }
  });

  it('never lets an online policy beat the optimum with flex-start; their schedules replay to their costs', () => {
    const random = seededRandom(17);
    let requests = 0;
    for (let i = 0; i < 40; i++) {
      const p = randomFlexProblem(random, 1 + (i % 3), 48, 20 + (i % 15), i % 3);
      const best = optimal(p);
      assert.ok(best !== undefined);
      for (const policy of onlinePolicies) {
        for (const view of [View.Full, View.Live]) {
          const run = simulate(p, policy, { view, probeFraction: 1, fleetFraction: 0, fleetSeed: 0 });
          const replay = evaluateSchedule(p, run.schedule);
          assert.ok(Math.abs(replay.cost - run.cost) < 1e-9, `${policy.name} ${view} case ${i}: replayed cost`);
          if (run.deadlineMet) assert.ok(run.cost >= best.cost - 1e-9, `${policy.name} ${view} case ${i}: ${run.cost} < optimum ${best.cost}`);
          if (policy.name === 'sterna') requests += run.flexRequests;
        }
      }
    }
    assert.ok(requests > 0, 'sterna asked for flex-start somewhere');
  });

  it('prices flex-start at the catalog\'s ratio and draws grants from its own seed, not the trace', () => {
    assert.ok(Math.abs(catalogFlexRatio() - 0.5) < 0.01);
    const trace = loadTrace(TRACE);
    const p = windowOf(trace, 100, { jobHours: 12, deadlineHours: 14, changeoverHours: 0.2 });
    const a = flexTierFor(p, 100, 1, DEFAULT_FLEX);
    assert.deepEqual(a, flexTierFor(p, 100, 1, DEFAULT_FLEX), 'seeded');
    assert.notDeepEqual(a.grant, flexTierFor(p, 100, 2, DEFAULT_FLEX).grant);
    assert.deepEqual(a.price, p.onDemandPrice.map((od) => od * catalogFlexRatio()));
  });

  it('the workflow\'s auto inputs give the benchmark\'s decisions with the tier (full view replayed)', () => {
    const trace = loadTrace(TRACE);
    const settings = { jobHours: 12, deadlineHours: 16, changeoverHours: 0.2 };
    let compared = 0;
    let flexSeen = 0;
    for (const start of windowStarts(trace.ticks, Math.floor(16 / (trace.gapSeconds / 3600)), 6, 9)) {
      const p = withFlex(windowOf(trace, start, settings), flexTierFor(windowOf(trace, start, settings), start, 3, { meanWaitHours: 0.5, maxWaitHours: 1 }));
      const log: { obs: Observation; action: Action }[] = [];
      const recorded: OnlinePolicy<PolicyState> = {
        name: 'sterna',
        initialState: sternaPolicy.initialState,
        decide(state, obs) {
          const d = sternaPolicy.decide(state, obs);
          log.push({ obs, action: d.action });
          return d;
        },
      };
      simulate(p, recorded, { view: View.Live, probeFraction: 1, fleetFraction: 0, fleetSeed: 0 });
      let saved: AutoState | undefined;
      const events: ZoneEvent[] = [];
      for (const { obs, action } of log) {
        const t = Math.round(obs.nowHours / p.tickHours);
        const nowMs = T0 + t * p.tickHours * HOUR_MS;
        // The run's own spot stockouts and preemptions, as the workflow records them, from what the view reported.
        for (const z of obs.zones) if (z.spotAvailable === false) events.push({ zone: z.zone, region: z.zone.slice(0, -1), provisioningModel: 'SPOT', kind: 'stockout', at: nowMs });
        const offers: Offer[] = p.zones.flatMap((zoneName, z) =>
          (['SPOT', 'STANDARD', 'FLEX_START'] as const).map((model) => ({
            backend: 'gce' as const,
            zone: zoneName,
            region: zoneName.slice(0, -1),
            accelerator: 'nvidia-tesla-v100',
            acceleratorCount: 1,
            machineType: 'n1-standard-8',
            provisioningModel: model,
            pricePerHour: model === 'SPOT' ? p.spotPrice[z][t] : model === 'STANDARD' ? p.onDemandPrice[z] : p.flex!.price[z],
            onDemandPricePerHour: p.onDemandPrice[z],
            quotaAvailable: true,
            ...(model === 'FLEX_START' ? { expectedWaitSeconds: p.flex!.meanWaitHours[z] * 3600 } : {}),
          })),
        );
        const inputs: AutoInputs = {
          offers,
          events: [...events],
          placement: { nowMs, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT', 'STANDARD', 'FLEX_START'] },
          nowMs,
          runStartMs: T0,
          deadlineMs: T0 + p.deadlineTicks * p.tickHours * HOUR_MS,
          remainingWorkSeconds: obs.remainingWorkHours * 3600,
          changeoverSeconds: obs.changeoverHours * 3600,
          changeoverRemainingSeconds: obs.changeoverRemainingHours * 3600,
          stepSeconds: p.tickHours * 3600,
          current: obs.current,
          flexStart: { maxWaitSeconds: p.flex!.maxWaitHours * 3600 },
        };
        const seen = saved?.eventsSeen ?? 0;
        const decision = decideAuto(saved, inputs);
        assert.deepEqual(decision.action, action, `window ${start} tick ${t}: action`);
        saved = JSON.parse(JSON.stringify(decision.state));
        assert.ok(seen <= events.length);
        compared++;
        if (action.kind === 'flex-start') flexSeen++;
      }
    }
    assert.ok(compared > 100 && flexSeen > 0, `${compared} decisions, ${flexSeen} flex-start requests compared`);
  });

  it('a slice of the tier\'s table: the optimum with flex-start is no dearer, sterna meets every deadline and saves with it', function () {
    this.timeout(120_000);
    const trace = loadTrace(TRACE, 'p3.2xlarge');
    const r = runBench(trace, { jobHours: 48, deadlineHours: 70, changeoverHours: 0.2, windows: 6, seed: 1, flex: DEFAULT_FLEX }, { view: View.Live, memory: Memory.Cold });
    for (const w of r.windows) {
      assert.ok(w.optimalCost <= w.policies[OPTIMAL_NO_FLEX].cost + 1e-9, `window ${w.startTick}`);
      for (const p of onlinePolicies) if (w.policies[p.name].deadlineMet) assert.ok(w.policies[p.name].cost >= w.optimalCost - 1e-9, `${p.name} window ${w.startTick}`);
      assert.ok(w.policies[STERNA_NO_FLEX].cost >= w.policies[OPTIMAL_NO_FLEX].cost - 1e-9);
    }
    const f = r.flex!;
    assert.equal(f.deadlinesWithFlex, f.windows);
    assert.ok(f.flexRequests > 0, JSON.stringify(f));
    assert.ok(f.sternaSavings > 0, JSON.stringify(f));
  });
});
