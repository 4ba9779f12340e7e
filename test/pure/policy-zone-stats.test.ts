import { strict as assert } from 'node:assert';
import { type Observation, type ZoneObservation, liveZones } from '../../workflows/policy';
import { availabilityChance } from '../../workflows/policy/expectations';
import { type StatsTable, emptyStats, foundRemainingHours, lookShare, observe, runAgeHours, upFraction } from '../../workflows/policy/zone-stats';

/** One decision's look at zone `a`: own (true/false), unseen, or another run's sighting. */
function at(nowHours: number, a: boolean | 'unknown', byOthers = false): Observation {
  const zone: ZoneObservation = { zone: 'a', spotAvailable: a, spotPrice: 1, onDemandPrice: 3, ...(byOthers ? { seenByOthers: true } : {}) };
  return { nowHours, remainingWorkHours: 1, hoursUntilDeadline: 2, changeoverHours: 0, stepHours: 1, current: { kind: 'idle' }, changeoverRemainingHours: 0, zones: [zone] };
}

function kept(table: StatsTable, looks: readonly (readonly [number, boolean | 'unknown', boolean?])[]): StatsTable {
  return looks.reduce((t, [hours, a, byOthers]) => observe(t, at(hours, a, byOthers === true)), table);
}

const todays = (): StatsTable => emptyStats();

describe('zone statistics: what a run may measure', () => {
  it('a run followed only along other runs\' looks is not measured (kept because it was short), its hours and transitions are', () => {
    // Up from hour 1 (seen starting), followed by others at hours 2 and 3, down at 4.
    const looks = [[0, false, true], [1, true, true], [2, true, true], [3, true, true], [4, false, true]] as const;
    const table = kept(todays(), looks);
    assert.deepEqual(table.upRuns, [], 'its length is not recorded');
    assert.deepEqual(table.upResiduals, []);
    assert.equal(table.zones.a.upHours, 3, 'the hours seen up still count');
    assert.equal(table.zones.a.preemptions, 1, 'and so does the preemption');
  });

  it('a run this run followed is measured, even when another run saw it first', () => {
    // Another run sees capacity at hour 1; this run's instance runs there from hour 2 until its preemption at 5.
    const table = kept(todays(), [[0, 'unknown'], [1, true, true], [2, true], [3, true], [4, true], [5, false]]);
    assert.deepEqual(table.upResiduals, [4], 'from first sight to its end');
  });

  it('a run ended by another run\'s look is not measured either', () => {
    const table = kept(todays(), [[0, true], [1, true], [2, false, true]]);
    assert.deepEqual(table.upResiduals, []);
    assert.equal(table.zones.a.preemptions, 1);
  });

  it('another run\'s look across a gap that finds the state last seen: held since its streak began if runs that lasted as long mostly do, else dated from the gap\'s midpoint; not measured', () => {
    // Zone a seen up at hour 0 only, then not seen until another run's look at hour 4 finds it up.
    // No run on record: as long again (Lindy), and a run seen for no time is not likely to hold 4 h.
    const brief = [[0, true], [1, 'unknown'], [4, true, true]] as const;
    assert.equal(runAgeHours(kept(todays(), brief), 'a', 4), 2, 'dated from hour 2, the gap\'s midpoint');
    // Seen up from hour 0 to 2: as long again covers the 2 h gap, so it held.
    const followed = [[0, true], [1, true], [2, true], [3, 'unknown'], [4, true, true]] as const;
    assert.equal(runAgeHours(kept(todays(), followed), 'a', 4), 4);
    // Unless the runs on record that lasted 2 h all ended before 4 h.
    assert.equal(runAgeHours(kept({ ...todays(), upRuns: [2.5, 3, 3.5] }, followed), 'a', 4), 1);
    // In a market of blips a young run is unlikely to outlast a gap, but a streak of looks that all found capacity adds up.
    const blips: StatsTable = { ...todays(), upRuns: [1.5, 1.5, 1.5, 1.5, 20] };
    const streak = [[0, true, true], [1, 'unknown'], [2, true, true], [3, 'unknown'], [4, true, true]] as const;
    assert.equal(runAgeHours(kept(blips, streak.slice(0, 3)), 'a', 2), 1, 'one gap: a blip is likelier, dated from the midpoint');
    assert.equal(runAgeHours(kept(blips, streak), 'a', 4), 4, 'two gaps: a run that lasted from hour 0 to 2 most likely lasts past 4');
    // A run's own look (its launch), or a look that finds the other state, is dated at the look.
    assert.equal(runAgeHours(kept(todays(), [[0, true], [1, true], [2, true], [3, 'unknown'], [4, true]]), 'a', 4), 0);
    assert.equal(runAgeHours(kept(todays(), [[0, false], [1, false], [2, false], [3, 'unknown'], [4, true, true]]), 'a', 4), 0);
    // Its start is a guess: followed to its end by this run's own looks, it is not measured.
    const ended = kept(todays(), [...followed, [5, true], [6, false]]);
    assert.deepEqual([ended.upRuns, ended.upResiduals], [[], []]);
    assert.equal(ended.zones.a.preemptions, 1);
  });

  it('a found run\'s remainder pools residuals with complete runs, one sample each', () => {
    // 99 complete runs of 2 h (a launch at an arbitrary moment finds 1 h left on average) and one residual of 10 h.
    const table: StatsTable = { ...todays(), upRuns: Array(99).fill(2), upResiduals: [10] };
    assert.ok(Math.abs(foundRemainingHours(table, false)! - (99 * 1 + 10) / 100) < 1e-9);
    assert.ok(Math.abs(foundRemainingHours(table, true)! - 1) < 0.02, 'the median is the runs\' (half of 2 h)');
  });

  it('a decision that saw some zone and none with capacity is a dry spell', () => {
    // Two zones; the run tries one at a time, as a live run does: a fails, then b fails, then a has capacity.
    const look = (nowHours: number, a: boolean | 'unknown', b: boolean | 'unknown'): Observation => ({
      ...at(nowHours, a),
      zones: [at(nowHours, a).zones[0], { ...at(nowHours, b).zones[0], zone: 'b' }],
    });
    const looks = [look(0, false, 'unknown'), look(1, 'unknown', false), look(2, true, 'unknown'), look(3, true, 'unknown')];
    const dry = looks.reduce(observe, todays());
    assert.deepEqual([dry.allDownHours, dry.observedHours], [2, 3], 'two of three hours found no capacity');
    // A decision that saw nothing (on on-demand, no launch tried) tells nothing either way.
    const blind = [look(0, false, 'unknown'), look(1, 'unknown', 'unknown'), look(2, false, 'unknown')].reduce(observe, todays());
    assert.deepEqual([blind.allDownHours, blind.observedHours], [1, 1]);
  });

  it('the live view marks what another run saw, and only that', () => {
    const quotes = ['a', 'b', 'c'].map((zone) => ({ zone, spotPrice: 1, onDemandPrice: 3 }));
    const zones = liveZones(quotes, { kind: 'spot', zone: 'a' }, [{ zone: 'a', available: false, byOthers: true }, { zone: 'b', available: false }, { zone: 'c', available: true, byOthers: true }]);
    assert.deepEqual(
      zones.map((z) => [z.spotAvailable, z.seenByOthers === true]),
      [[true, false], [false, false], [true, true]],
    );
  });

  it('a launch\'s chance of capacity is the share of the looks across a gap that found it, not of the hours watched', () => {
    // A live run: its instance runs in zone a from hour 0 to 10 (watched, up) and is preempted
    // at 11; then it launches into a now and then, each launch a look across a gap.
    const running = Array.from({ length: 12 }, (_, h) => [h, h < 11] as const);
    const launches = [[12, 'unknown'], [13, false], [14, 'unknown'], [15, true], [16, false], [17, 'unknown'], [18, false], [19, 'unknown'], [20, false], [21, 'unknown'], [22, false], [23, 'unknown'], [24, false]] as const;
    const table = kept(todays(), [...running, ...launches]);
    assert.deepEqual([table.zones.a.looks, table.zones.a.hits], [7, 2], 'the first launch and six more (hours 11 and 16 are preemptions, seen while watched: not looks)');
    assert.ok(upFraction(table, 1) > 0.85, `the hours watched are the instance's, nearly all up: ${upFraction(table, 1)}`);
    const prior = upFraction(table, 1);
    assert.equal(lookShare(table, prior), (2 + 2 * prior) / (7 + 2));
    assert.equal(lookShare(todays(), prior), prior, 'no look yet: the prior');
    // Hours later, a's outage has most likely ended: its chance nears the looks' share, not the hours'.
    const later = { ...at(40, 'unknown'), stepHours: 1 };
    const chance = availabilityChance(table, later, 'a');
    assert.ok(chance < 0.5 && chance <= lookShare(table, prior) + 1e-12, `a launch into a is less likely than not to find capacity: ${chance}`);
  });
});
