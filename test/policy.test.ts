import { strict as assert } from 'node:assert';
import { bestFixedPair, pairPolicy, thresholdPolicy, thresholdRuns } from '../bench/hindsight';
import { optimal } from '../bench/optimal';
import { PAIR, onlinePolicies } from '../bench/policies';
import { Memory, runBenchVariants } from '../bench/run';
import { type Problem, windowOf } from '../bench/problem';
import { evaluateSchedule } from '../bench/schedule';
import { View, simulate } from '../bench/simulate';
import { loadTrace } from '../bench/trace';
import { windowStarts } from '../bench/windows';
import { seededRandom } from '../workflows/random';
import { bruteForce } from './helpers/brute-force';
import { type Observation, decide, initialState, sternaPolicy } from '../workflows/policy';
import { availabilityChance, likelyRemainingUptimeHours, meanUptimeHours } from '../workflows/policy/expectations';
import { slackBudget } from '../workflows/policy/slack-budget';
import { slackHours } from '../workflows/policy/deadline';
import { type StatsTable, allDownFraction, emptyStats, expectedRemainingHours, medianRemainingHours, observe } from '../workflows/policy/zone-stats';

const TRACE_DIR = `${__dirname}/../../../shared/traces`;

function randomProblem(random: () => number, zones: number, deadlineTicks: number, workTicks: number, changeoverTicks: number): Problem {
  const names = Array.from({ length: zones }, (_, z) => `zone-${z}`);
  return {
    zones: names,
    available: names.map(() => Uint8Array.from({ length: deadlineTicks }, () => (random() < 0.6 ? 1 : 0))),
    spotPrice: names.map(() => Float64Array.from({ length: deadlineTicks }, () => 0.5 + random())),
    onDemandPrice: names.map(() => 2 + 2 * random()),
    tickHours: 0.25,
    deadlineTicks,
    workTicks,
    changeoverTicks,
  };
}

describe('policy benchmark', () => {
  it('finds the same optimum as brute force on tiny random windows', () => {
    const random = seededRandom(7);
    for (let i = 0; i < 60; i++) {
      const zones = i % 4 === 3 ? 3 : 2;
      const T = zones === 3 ? 6 : 6 + (i % 3);
      const p = randomProblem(random, zones, T, 2 + (i % 4), i % 3);
      const expected = bruteForce(p);
      const got = optimal(p);
      if (!Number.isFinite(expected)) {
        assert.equal(got, undefined, `case ${i}: infeasible`);
        continue;
      }
      assert.ok(got !== undefined, `case ${i}: feasible`);
      assert.ok(Math.abs(got.cost - expected) < 1e-9, `case ${i}: dp ${got.cost} vs brute ${expected}`);
      const replay = evaluateSchedule(p, got.schedule);
      assert.ok(Math.abs(replay.cost - got.cost) < 1e-9 && replay.deadlineMet, `case ${i}: schedule ${got.schedule} replays to the cost`);
    }
  });

  it('never lets an online policy beat the optimum, and every schedule replays to its cost', () => {
    const random = seededRandom(11);
    for (let i = 0; i < 60; i++) {
      const p = randomProblem(random, 1 + (i % 4), 40, 20 + (i % 15), i % 4);
      const best = optimal(p);
      assert.ok(best !== undefined);
      for (const policy of onlinePolicies) {
        const run = simulate(p, policy);
        const replay = evaluateSchedule(p, run.schedule);
        assert.ok(Math.abs(replay.cost - run.cost) < 1e-9, `${policy.name} case ${i}: replayed cost`);
        assert.equal(replay.finishTick, run.finishTick, `${policy.name} case ${i}: replayed finish`);
        if (run.deadlineMet) assert.ok(run.cost >= best.cost - 1e-9, `${policy.name} case ${i}: ${run.cost} < optimum ${best.cost}`);
      }
    }
  });

  it('brackets the threshold family: per-window hindsight <= best fixed pair, both >= the optimum', () => {
    const random = seededRandom(5);
    const problems = Array.from({ length: 8 }, () => randomProblem(random, 2, 40, 30, 2));
    const optima = problems.map((p) => optimal(p)?.cost ?? NaN);
    const runs = problems.map(thresholdRuns);
    const k = bestFixedPair(runs, optima);
    problems.forEach((p, w) => {
      const perWindow = Math.min(...runs[w].map((r) => r.cost));
      assert.ok(perWindow >= optima[w] - 1e-9 && perWindow <= runs[w][k].cost + 1e-9, `window ${w}`);
      const { waitTicks, holdTicks, cost } = runs[w][k];
      if (Number.isFinite(cost)) assert.ok(Math.abs(simulate(p, thresholdPolicy(waitTicks, holdTicks)).cost - cost) < 1e-9);
    });
  });

  it('carries a threshold pair given in changeovers to each row as whole ticks of its d, in the full view only', () => {
    assert.equal(pairPolicy({ waitChangeovers: 2.5, holdChangeovers: 8 }, 2).name, thresholdPolicy(5, 16).name);
    assert.equal(pairPolicy({ waitChangeovers: 2.5, holdChangeovers: 8 }, 1).name, thresholdPolicy(3, 8).name);
    const trace = loadTrace(`${TRACE_DIR}/aws-gpu-2zone-2022-10.json`);
    const options = { jobHours: 8, deadlineHours: 9, changeoverHours: 0.2, windows: 2, seed: 1, thresholds: { waitChangeovers: 1, holdChangeovers: 4 } };
    const [full, live] = runBenchVariants(trace, options, [
      { view: View.Full, memory: Memory.Cold },
      { view: View.Live, memory: Memory.Cold },
    ]);
    const changeoverTicks = full.changeoverTicks;
    for (const w of full.windows) {
      const p = windowOf(trace, w.startTick, options);
      assert.equal(w.policies[PAIR].cost, simulate(p, thresholdPolicy(changeoverTicks, 4 * changeoverTicks)).cost);
    }
    assert.ok(full.summary[PAIR] !== undefined);
    assert.equal(live.summary[PAIR], undefined, 'the family reads every zone each tick: no live-view figure');
    assert.ok(live.windows.every((w) => w.policies[PAIR] === undefined));
  });

  for (const [file, settings] of [
    ['aws-v100-9zone-2023-02.json', { jobHours: 8, deadlineHours: 9, changeoverHours: 0.2 }],
    ['aws-gpu-2zone-2022-10.json', { jobHours: 8, deadlineHours: 9, changeoverHours: 0.2 }],
  ] as const) {
    it(`sterna meets every deadline on windows of ${file}`, () => {
      const trace = loadTrace(`${TRACE_DIR}/${file}`);
      const deadlineTicks = Math.floor(settings.deadlineHours / (trace.gapSeconds / 3600));
      for (const start of windowStarts(trace.ticks, deadlineTicks, 20, 3)) {
        const run = simulate(windowOf(trace, start, settings), sternaPolicy);
        assert.ok(run.deadlineMet, `window at tick ${start}: ${run.schedule}`);
      }
    });
  }

  describe('decide()', () => {
    const observation = (over: Partial<Observation> = {}): Observation => ({
      nowHours: 0,
      remainingWorkHours: 48,
      hoursUntilDeadline: 52,
      changeoverHours: 0.2,
      stepHours: 0.25,
      current: { kind: 'idle' },
      changeoverRemainingHours: 0,
      zones: [
        { zone: 'us-central1-a', spotAvailable: true, spotPrice: 0.9, onDemandPrice: 3.06 },
        { zone: 'us-east1-b', spotAvailable: 'unknown', spotPrice: 0.8, onDemandPrice: 3.06 },
      ],
      ...over,
    });

    it('starts on spot where capacity is known, with JSON-plain state', () => {
      const { action, state } = decide(initialState(), observation());
      assert.deepEqual(action, { kind: 'spot', zone: 'us-central1-a' });
      assert.deepEqual(JSON.parse(JSON.stringify(state)), state);
    });

    it('tries a zone of unknown availability when no probed zone has capacity', () => {
      const zones = observation().zones.map((z) => ({ ...z, spotAvailable: z.zone === 'us-central1-a' ? false : ('unknown' as const) }));
      assert.deepEqual(decide(initialState(), observation({ zones })).action, { kind: 'spot', zone: 'us-east1-b' });
    });

    it('goes on-demand when the deadline leaves no room for a spot start and a preemption', () => {
      const obs = observation({ remainingWorkHours: 10, hoursUntilDeadline: 10.3 });
      assert.equal(decide(initialState(), obs).action.kind, 'on-demand');
    });

    it('counts on the median, not the mean, of a heavy-tailed run: one long run does not make a blip worth a return', () => {
      const runs = [0.25, 0.25, 0.25, 0.5, 48];
      assert.equal(medianRemainingHours(runs, 0), 0.25);
      assert.ok((expectedRemainingHours(runs, 0) ?? 0) > 9);
      assert.equal(medianRemainingHours(runs, 0.25), 0.25);
      assert.equal(medianRemainingHours(runs, 1), 47);
      assert.equal(medianRemainingHours(runs, 48), undefined);
    });

    it('stays on on-demand when capacity returns in a market of blips, however long its rare runs', () => {
      // Zone a: eight 0.5 h blips and one 40 h run observed; on on-demand when it returns again.
      let state = initialState();
      const zone = (up: boolean) => [{ zone: 'a', spotAvailable: up, spotPrice: 0.9, onDemandPrice: 3.06 }];
      let now = 0;
      const feed = (up: boolean, hours: number) => {
        for (let t = 0; t < hours / 0.25; t++, now += 0.25) state = decide(state, observation({ nowHours: now, hoursUntilDeadline: 200 - now, remainingWorkHours: 48, zones: zone(up) })).state;
      };
      feed(false, 0.25);
      feed(true, 40);
      for (let i = 0; i < 8; i++) {
        feed(false, 0.5);
        feed(true, 0.5);
      }
      feed(false, 0.5);
      feed(true, 0.25);
      const obs = observation({ nowHours: now, hoursUntilDeadline: 52, remainingWorkHours: 48, current: { kind: 'on-demand', zone: 'a' }, zones: zone(true) });
      assert.deepEqual(decide(state, obs).action, { kind: 'on-demand', zone: 'a' });
    });

    it('counts on capacity that has outlasted every run on record to last as long again, so it leaves on-demand for it', () => {
      // Zone a in half-hour blips for 20 h, then up for 10 h: longer than any run on record.
      let memory: StatsTable = emptyStats();
      const zone = (up: boolean) => [{ zone: 'a', spotAvailable: up, spotPrice: 0.9, onDemandPrice: 3.06 }];
      for (let t = 0; t < 120; t++) memory = observe(memory, observation({ nowHours: t * 0.25 - 30, zones: zone(t < 80 ? t % 4 < 2 : true) }));
      // Two changeovers of 0.5 h: a return must count on more than the 1.1 h mean run to pay for them.
      const obs = observation({ current: { kind: 'on-demand', zone: 'a' }, zones: zone(true), changeoverHours: 0.5 });
      assert.ok(Math.max(...memory.upRuns) < 1, 'every run on record is a blip');
      assert.equal(likelyRemainingUptimeHours(memory, obs, 'a'), 10, 'as long again, not the mean run (about 1.1 h)');
      assert.deepEqual(decide(initialState(memory), obs).action, { kind: 'spot', zone: 'a' });
    });

    it('leaves on-demand for a run that pays its changeovers in money, when their slack is slack a wait would spend for free', () => {
      // Zone a up 1 h, down 1 h, all along; the run has been on on-demand for 40 h of it,
      // keeping 6.5 h of slack: more than the reserve and Uniform Progress's pace ask for.
      const at = (t: number): Observation =>
        observation({
          nowHours: t,
          remainingWorkHours: 80 - t,
          hoursUntilDeadline: 86.5 - t,
          current: { kind: 'on-demand', zone: 'a' },
          zones: [{ zone: 'a', spotAvailable: (t + 0.25) % 2 < 1, spotPrice: 0.9, onDemandPrice: 3.06 }],
        });
      let state = initialState();
      for (let t = 0; t < 40; t += 0.25) state = decide(state, at(t)).state;
      // Capacity a quarter of an hour old: its likely 0.75 h more pays the two 0.2 h changeovers in money...
      const budget = slackBudget(observe(state.stats, at(40)), state.start!, at(40), 3.06 - 0.9);
      assert.ok(budget.freeAfterWaiting >= 0.4, `the changeovers' 0.4 h fit in the free slack: ${JSON.stringify(budget)}`);
      assert.ok(budget.slackPrice * 0.4 > (3.06 - 0.9) * 0.75 - 3.06 * 0.4, 'but not their slack at its price');
      // ...so it leaves: priced, that slack would keep the run on on-demand, its slack unspent.
      assert.deepEqual(decide(state, at(40)).action, { kind: 'spot', zone: 'a' });
    });

    describe('a launch into a zone it cannot see', () => {
      // Memory: both zones watched for 60 h, zone x (cheaper) up 4 h and down 1 h in turn, y up
      // throughout; x was last seen down. Then neither is seen for 2 h: x's capacity is likely,
      // not sure, and y's is all but sure.
      const zones = (x: boolean | 'unknown', y: boolean | 'unknown') => [
        { zone: 'x', spotAvailable: x, spotPrice: 0.7, onDemandPrice: 3.06 },
        { zone: 'y', spotAvailable: y, spotPrice: 0.85, onDemandPrice: 3.06 },
      ];
      let memory: StatsTable = emptyStats();
      for (let t = 0; t < 240; t++) memory = observe(memory, observation({ nowHours: t * 0.25 - 62, zones: zones(t % 20 < 16, true) }));
      const unseen = observation({ zones: zones('unknown', 'unknown'), hoursUntilDeadline: 70 });

      it('prices a failed launch as the step it costs once outages are on record, so the cheaper likely zone is tried first', () => {
        const chance = availabilityChance(memory, unseen, 'x');
        // Likely, and short enough of sure that dividing x's price by it makes x dearer than y.
        assert.ok(memory.downRuns.length > 0 && chance > 0.5 && chance < 0.7 / 0.85, `x is likely, not sure (chance ${chance})`);
        assert.deepEqual(decide(initialState(memory), unseen).action, { kind: 'spot', zone: 'x' });
      });

      it('divides by the chance, as a hedge, while no outage is on record', () => {
        const noOutage = { ...memory, downRuns: [] };
        assert.deepEqual(decide(initialState(noOutage), unseen).action, { kind: 'spot', zone: 'y' });
      });
    });

    it('prices an hour of slack at no more than the spot it buys: in a market of blips and long dry spells, below the premium', () => {
      // A week of one zone up 0.5 h, then down 1 h: a spot hour costs 0.4 h of changeovers and 2 h of waiting.
      let memory: StatsTable = emptyStats();
      const zone = (up: boolean) => [{ zone: 'a', spotAvailable: up, spotPrice: 0.9, onDemandPrice: 3.06 }];
      for (let t = 0; t < 672; t++) memory = observe(memory, observation({ nowHours: t * 0.25 - 168, zones: zone(t % 6 < 2) }));
      const obs = observation({ hoursUntilDeadline: 70, zones: zone(false) });
      const start = { slackHours: 22, hoursUntilDeadline: 70 };
      const premium = 3.06 - 0.9;
      const slackPerSpotHour = 0.2 / meanUptimeHours(memory, obs, '') + allDownFraction(memory, 70) / (1 - allDownFraction(memory, 70));
      assert.ok(slackPerSpotHour > 2 && slackPerSpotHour < 2.7, `about 0.2-0.4 + 2 (${slackPerSpotHour})`);
      const now = slackBudget(memory, start, obs, premium);
      // The premium, scaled by how much of the slack the changeovers ahead need, then divided by the slack a spot hour uses.
      const needed = Math.min(1, now.reserveHours / slackHours(obs));
      assert.ok(Math.abs(now.slackPrice - (premium * needed) / slackPerSpotHour) < 1e-9, `${now.slackPrice}, not the premium ${premium}`);
    });

    it('counts the changeovers ahead at the mean uptime of all zones: a run preempted where capacity lasts goes where capacity is', () => {
      // Two days of zone a up 20 h at a time and zone b in 0.5 h blips; now both are down.
      let memory: StatsTable = emptyStats();
      const zones = (a: boolean, b: boolean) => [
        { zone: 'a', spotAvailable: a, spotPrice: 0.9, onDemandPrice: 3.06 },
        { zone: 'b', spotAvailable: b, spotPrice: 0.9, onDemandPrice: 3.06 },
      ];
      for (let t = 0; t < 192; t++) memory = observe(memory, observation({ nowHours: t * 0.25 - 48, zones: zones(t % 84 < 80, t % 4 < 2) }));
      const obs = observation({ hoursUntilDeadline: 50, zones: zones(false, false) });
      const start = { slackHours: 2, hoursUntilDeadline: 50 };
      const premium = 3.06 - 0.9;
      const longest = meanUptimeHours(memory, obs, 'a');
      const pooled = meanUptimeHours(memory, obs, '');
      assert.ok(longest > 5 * pooled, `a lasts (${longest} h), the market does not (${pooled} h)`);
      const now = slackBudget(memory, start, obs, premium);
      const reserveAt = (uptimeHours: number) => (obs.remainingWorkHours / uptimeHours) * obs.changeoverHours * (1 + allDownFraction(memory, obs.hoursUntilDeadline));
      assert.ok(Math.abs(now.reserveHours - reserveAt(pooled)) < 1e-9, `${now.reserveHours} h: the market's changeovers, not zone a's (${reserveAt(longest)} h)`);
      // With 2 h of slack the outage is not free to wait out: the run covers it with on-demand.
      assert.ok(now.freeAfterWaiting < 0);
      assert.deepEqual(decide(initialState(memory), obs).action, { kind: 'on-demand', zone: 'a' });
    });

    it('keeps a running on-demand instance rather than paying a new changeover elsewhere', () => {
      const obs = observation({ remainingWorkHours: 10, hoursUntilDeadline: 10.1, current: { kind: 'on-demand', zone: 'us-east1-b' } });
      assert.deepEqual(decide(initialState(), obs).action, { kind: 'on-demand', zone: 'us-east1-b' });
    });
  });
});
