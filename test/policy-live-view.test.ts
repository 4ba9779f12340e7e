import { strict as assert } from 'node:assert';
import { decideAuto, observation, type AutoInputs, type AutoState } from '../workflows/auto-policy';
import { type ZoneEvent, ZoneEventKind } from '../workflows/placement';
import { type Action, type Observation, type OnlinePolicy, type PolicyState, liveZones, sternaPolicy } from '../workflows/policy';
import { eagerNextRegionPolicy } from '../workflows/policy/baselines/eager-next-region';
import { emptyStats, observe } from '../workflows/policy/zone-stats';
import type { Offer } from '../workflows/types';
import { type Problem, windowOf } from '../bench/problem';
import { View, simulate } from '../bench/simulate';
import { loadTrace } from '../bench/trace';
import { windowStarts } from '../bench/windows';

const TRACE = `${__dirname}/../../../shared/traces/aws-gpu-2zone-2022-10.json`;
const HOUR_MS = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00Z');

interface Asked {
  obs: Observation;
  action: Action;
}

/** sterna, recording every observation the benchmark shows it and every action it takes. */
function recorded(log: Asked[]): OnlinePolicy<PolicyState> {
  return {
    name: 'sterna',
    initialState: sternaPolicy.initialState,
    decide(state, obs) {
      const decision = sternaPolicy.decide(state, obs);
      log.push({ obs, action: decision.action });
      return decision;
    },
  };
}

function offersAt(p: Problem, t: number): Offer[] {
  return p.zones.flatMap((zone, z) =>
    (['SPOT', 'STANDARD'] as const).map((model) => ({
      backend: 'gce' as const,
      zone,
      region: zone.slice(0, -1),
      accelerator: 'nvidia-tesla-v100',
      acceleratorCount: 1,
      machineType: 'n1-standard-8',
      provisioningModel: model,
      pricePerHour: model === 'SPOT' ? p.spotPrice[z][t] : p.onDemandPrice[z],
      onDemandPricePerHour: p.onDemandPrice[z],
      quotaAvailable: true,
    })),
  );
}

describe('the live view is one rule for the benchmark and the workflow', () => {
  it('reports the running zone up, what was seen since the last decision, and nothing else', () => {
    const quotes = ['a', 'b', 'c'].map((zone) => ({ zone, spotPrice: 1, onDemandPrice: 3 }));
    const zones = liveZones(quotes, { kind: 'spot', zone: 'a' }, [{ zone: 'b', available: false }]);
    assert.deepEqual(zones.map((z) => z.spotAvailable), [true, false, 'unknown']);
  });

  it('eager-next-region finds capacity it cannot see by launching: each untried zone, cheapest first, then a wait', () => {
    const obs = (spotAvailable: Record<string, boolean | 'unknown'>): Observation => ({
      nowHours: 0,
      remainingWorkHours: 10,
      hoursUntilDeadline: 20,
      changeoverHours: 0.1,
      stepHours: 0.25,
      current: { kind: 'idle' },
      changeoverRemainingHours: 0,
      zones: ['a', 'b', 'c'].map((zone, i) => ({ zone, spotAvailable: spotAvailable[zone] ?? 'unknown', spotPrice: 1 + i, onDemandPrice: 5 })),
    });
    let state = eagerNextRegionPolicy.initialState();
    const tried: string[] = [];
    const sightings: Record<string, boolean>[] = [{}, { a: false }, { b: false }, { c: false }];
    for (const seen of sightings) {
      const d = eagerNextRegionPolicy.decide(state, obs(seen));
      state = d.state;
      tried.push(d.action.kind === 'spot' ? d.action.zone : d.action.kind);
    }
    assert.deepEqual(tried, ['a', 'b', 'c', 'idle']);
  });

  it('zone statistics book no hours across a gap in what was seen', () => {
    const at = (nowHours: number, a: boolean | 'unknown'): Observation => ({
      nowHours, remainingWorkHours: 1, hoursUntilDeadline: 2, changeoverHours: 0, stepHours: 1, current: { kind: 'idle' }, changeoverRemainingHours: 0,
      zones: [{ zone: 'a', spotAvailable: a, spotPrice: 1, onDemandPrice: 3 }],
    });
    let table = emptyStats();
    for (const [t, a] of [[0, false], [1, 'unknown'], [5, true], [6, true], [7, false]] as const) table = observe(table, at(t, a));
    assert.equal(table.zones.a.downHours, 0, 'the 5 unseen hours are neither up nor down');
    assert.equal(table.zones.a.upHours, 2);
    assert.equal(table.zones.a.preemptions, 1);
    assert.deepEqual(table.upRuns, [], 'the run was not seen starting');
    assert.deepEqual(table.upResiduals, [2], 'but it was seen from first sight to its end');
  });

  it('a window replayed through the workflow\'s auto-mode inputs gets the benchmark\'s live-view decisions', () => {
    const trace = loadTrace(TRACE);
    const settings = { jobHours: 12, deadlineHours: 14, changeoverHours: 0.2 };
    let compared = 0;
    let probes = 0;
    for (const start of windowStarts(trace.ticks, Math.floor(14 / (trace.gapSeconds / 3600)), 6, 4)) {
      const p = windowOf(trace, start, settings);
      const log: Asked[] = [];
      simulate(p, recorded(log), { view: View.Live, probeFraction: 1, fleetFraction: 0, fleetSeed: 0 });
      // Replay: the run's own zone events, as the workflow records them, from the trace and the decisions alone.
      const events: ZoneEvent[] = [];
      let saved: AutoState | undefined;
      let running: Action = { kind: 'idle' };
      let lastTick = -1;
      for (const { obs, action } of log) {
        const t = Math.round(obs.nowHours / p.tickHours);
        const nowMs = T0 + t * p.tickHours * HOUR_MS;
        const zone = (a: Action) => p.zones.indexOf(a.kind === 'idle' ? '' : a.zone);
        if (t !== lastTick && running.kind === 'spot' && p.available[zone(running)][t] === 0) {
          events.push({ zone: running.zone, region: running.zone.slice(0, -1), provisioningModel: 'SPOT', kind: ZoneEventKind.Preempted, at: nowMs });
          running = { kind: 'idle' };
        }
        lastTick = t;
        const inputs: AutoInputs = {
          offers: offersAt(p, t),
          events: [...events],
          placement: { nowMs, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT', 'STANDARD'] },
          nowMs,
          runStartMs: T0,
          deadlineMs: T0 + p.deadlineTicks * p.tickHours * HOUR_MS,
          remainingWorkSeconds: obs.remainingWorkHours * 3600,
          changeoverSeconds: obs.changeoverHours * 3600,
          changeoverRemainingSeconds: obs.changeoverRemainingHours * 3600,
          stepSeconds: p.tickHours * 3600,
          current: running,
        };
        const seen = saved?.eventsSeen ?? 0;
        const mine = observation(inputs, seen);
        assert.deepEqual(mine.zones, obs.zones, `window ${start} tick ${t}: zones`);
        const decision = decideAuto(saved, inputs);
        assert.deepEqual(decision.action, action, `window ${start} tick ${t}: action`);
        saved = JSON.parse(JSON.stringify(decision.state));
        compared++;
        if (action.kind === 'spot' && p.available[zone(action)][t] === 0) {
          probes++;
          events.push({ zone: action.zone, region: action.zone.slice(0, -1), provisioningModel: 'SPOT', kind: ZoneEventKind.Stockout, at: nowMs });
        } else running = action;
      }
    }
    assert.ok(compared > 100 && probes > 0, `${compared} decisions, ${probes} failed launches compared`);
  });
});
