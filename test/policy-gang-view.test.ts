/**
 * Gangs: the benchmark's rule (a gang of N has capacity in a zone only while
 * availableNodes >= N there, at N times the node's price; bench/trace.ts) and the
 * workflow's gang placement (auto mode over gang offers, whose endings come from its nodes'
 * snapshots, workflows/run/gang.ts) are the same problem. Windows of the 16-node trace are
 * replayed through the workflow's inputs, built from the nodes the trace counts, and must
 * get the benchmark's observations and decisions, as policy-live-view.test.ts checks for
 * one node.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { readTraceFile, type TraceFile } from '../config/spot-trace';
import { decideAuto, observation, type AutoInputs, type AutoState } from '../workflows/auto-policy';
import { type ZoneEvent } from '../workflows/placement';
import { type Action, type Observation, type OnlinePolicy, type PolicyState, sternaPolicy } from '../workflows/policy';
import { ENDINGS } from '../workflows/run/endings';
import { gangSnapshot, gangSize } from '../workflows/run/gang';
import { endingOf } from '../workflows/run/machine';
import { AttemptOutcome, type Ending } from '../workflows/run/state';
import type { AgentSnapshot, Offer } from '../workflows/types';
import { type Problem, windowOf } from '../bench/problem';
import { View, simulate } from '../bench/simulate';
import { narrowTrace } from '../bench/trace';
import { windowStarts } from '../bench/windows';

const TRACE = join(__dirname, '..', '..', '..', 'shared', 'traces', 'aws-v100-3zone-16node-2023-08.json');
const T0 = Date.parse('2026-01-01T00:00:00Z');

interface Asked {
  obs: Observation;
  action: Action;
  /** The policy's state before and after the decision (JSON-plain). */
  before: PolicyState;
  after: PolicyState;
}

function recorded(log: Asked[]): OnlinePolicy<PolicyState> {
  return {
    name: 'sterna',
    initialState: sternaPolicy.initialState,
    decide(state, obs) {
      const decision = sternaPolicy.decide(state, obs);
      log.push({ obs, action: decision.action, before: JSON.parse(JSON.stringify(state)) as PolicyState, after: JSON.parse(JSON.stringify(decision.state)) as PolicyState });
      return decision;
    },
  };
}

/**
 * The benchmark's clock is tick x tick hours, the workflow's milliseconds over an hour's:
 * the same instant can differ in the last bit, e.g. 11.583333333333332 h against
 * 11.583333333333334 h at 139 x 300 s. Everything else must be equal.
 */
function sameButTheClock(mine: Observation, theirs: Observation): boolean {
  const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;
  const { nowHours, hoursUntilDeadline, ...rest } = mine;
  const { nowHours: n, hoursUntilDeadline: h, ...others } = theirs;
  assert.deepEqual(rest, others);
  return close(nowHours, n) && close(hoursUntilDeadline, h);
}

/** The gang's offers as the GCE provider makes them: one node's price times the nodes, and `nodes` (activities/providers/gce.ts). */
function gangOffers(file: TraceFile, nodes: number, tick: number): Offer[] {
  return file.entries.flatMap((e) =>
    (['SPOT', 'STANDARD'] as const).map((model) => {
      const node = model === 'SPOT' ? (Array.isArray(e.spotPrice) ? e.spotPrice[tick] : e.spotPrice) : e.onDemandPrice;
      return {
        backend: 'gce' as const,
        zone: e.zone,
        region: e.region ?? e.zone.slice(0, -1),
        accelerator: 'nvidia-tesla-v100',
        acceleratorCount: 1,
        machineType: 'n1-standard-8',
        provisioningModel: model,
        pricePerHour: node * nodes,
        onDemandPricePerHour: e.onDemandPrice * nodes,
        quotaAvailable: true,
        nodes,
      };
    }),
  );
}

/** Every node's snapshot when `up` of the gang's nodes still run: the others are gone. */
function nodeSnapshots(nodes: number, up: number): AgentSnapshot[] {
  return Array.from({ length: nodes }, (_, rank): AgentSnapshot => (rank < up ? { lifecycle: 'running', preempted: false, phase: 'training' } : { lifecycle: 'gone', preempted: true }));
}

/** The zone event the workflow records for an attempt's ending (endings.ts), as the run's own. */
function zoneEvent(ending: Ending, zone: string, at: number): ZoneEvent {
  const kind = ENDINGS[ending].zoneEvent;
  assert.ok(kind !== undefined, `${ending} records a zone event`);
  return { zone, region: zone.slice(0, -1), provisioningModel: 'SPOT', kind, at };
}

describe('gang placement: the workflow\'s gang inputs get the benchmark\'s decisions', function () {
  this.timeout(60_000);
  const file = readTraceFile(TRACE);

  for (const nodes of [4, 8, 16]) {
    it(`a gang of ${nodes}: windows of the 16-node trace replayed through the workflow's gang offers and endings`, () => {
      const trace = narrowTrace(file, undefined, nodes);
      const settings = { jobHours: 24, deadlineHours: 30, changeoverHours: 0.2 };
      let compared = 0;
      let clockTies = 0;
      let stockouts = 0;
      let preemptions = 0;
      for (const start of windowStarts(trace.ticks, Math.floor(30 / (trace.gapSeconds / 3600)), 4, nodes)) {
        const p: Problem = windowOf(trace, start, settings);
        const log: Asked[] = [];
        simulate(p, recorded(log), { view: View.Live, probeFraction: 1, fleetFraction: 0, fleetSeed: 0 });
        // What the trace counted: how many of the pool's nodes could run, per zone and tick.
        const counted = (zone: string, t: number) => file.entries.find((e) => e.zone === zone)!.availableNodes![start + t];
        const events: ZoneEvent[] = [];
        let saved: AutoState | undefined;
        let running: Action = { kind: 'idle' };
        let lastTick = -1;
        for (const { obs, action, before, after } of log) {
          const t = Math.round(obs.nowHours / p.tickHours);
          const nowMs = T0 + t * trace.gapSeconds * 1000;
          if (t !== lastTick && running.kind === 'spot') {
            // The run's look at its gang: every node's snapshot, the gang's one verdict, its ending.
            const ending = endingOf(gangSnapshot(nodeSnapshots(nodes, Math.min(nodes, counted(running.zone, t)))), false);
            if (ending !== undefined) {
              assert.equal(ending.outcome, AttemptOutcome.Preempted);
              events.push(zoneEvent(ending.outcome, running.zone, nowMs));
              running = { kind: 'idle' };
              preemptions++;
            }
          }
          lastTick = t;
          const offers = gangOffers(file, nodes, start + t);
          assert.ok(offers.every((o) => gangSize(o) === nodes));
          const inputs: AutoInputs = {
            offers,
            events: [...events],
            placement: { nowMs, cooldownSeconds: 1800, expectedHours: 1, models: ['SPOT', 'STANDARD'] },
            nowMs,
            runStartMs: T0,
            deadlineMs: T0 + p.deadlineTicks * trace.gapSeconds * 1000,
            remainingWorkSeconds: obs.remainingWorkHours * 3600,
            changeoverSeconds: obs.changeoverHours * 3600,
            changeoverRemainingSeconds: obs.changeoverRemainingHours * 3600,
            stepSeconds: p.tickHours * 3600,
            current: running,
          };
          const seen = saved?.eventsSeen ?? 0;
          const mine = observation(inputs, seen);
          assert.ok(sameButTheClock(mine, obs), `gang ${nodes} window ${start} tick ${t}: observation`);
          const decision = decideAuto(saved, inputs);
          compared++;
          if (JSON.stringify(decision.action) === JSON.stringify(action)) saved = JSON.parse(JSON.stringify(decision.state));
          else {
            // Only an exact tie on the tick grid may tell them apart: the benchmark's policy state, shown the workflow's clock, decides as the workflow did.
            assert.deepEqual(sternaPolicy.decide(before, mine).action, decision.action, `gang ${nodes} window ${start} tick ${t}: action ${JSON.stringify(decision.action)}, the benchmark's ${JSON.stringify(action)}`);
            clockTies++;
            saved = { policy: after, eventsSeen: events.length, decidedAtMs: nowMs };
          }
          // A gang launch fails when some node cannot be created: the provider's stockout for the gang.
          if (action.kind === 'spot' && counted(action.zone, t) < nodes) {
            stockouts++;
            events.push(zoneEvent(AttemptOutcome.Stockout, action.zone, nowMs));
          } else running = action;
        }
      }
      assert.ok(compared > 100 && stockouts > 0 && preemptions > 0, `${compared} decisions, ${stockouts} failed gang launches, ${preemptions} gangs ended by a lost node`);
      assert.ok(clockTies <= compared / 100, `${clockTies} of ${compared} decisions differ by the clock's last bit`);
      console.log(`      gang of ${nodes}: ${compared} decisions, ${stockouts} failed gang launches, ${preemptions} gangs ended by a lost node, ${clockTies} decided on the clock's last bit`);
    });
  }
});
