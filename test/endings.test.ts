/**
 * The one table of attempt endings (workflows/run/endings.ts), server-less: every ending
 * has a row, every row is consistent with itself and with the other vocabularies it joins,
 * and the strings stored in run state have not moved (running executions carry them
 * through continue-as-new).
 */
import { strict as assert } from 'node:assert';
import { FailureType, nonRetryableFailureTypes } from '../workflows/failures';
import { ZoneEventKind } from '../workflows/placement';
import { AGENT_EXITS, ENDING_NAMES, ENDINGS, Next, PROVISION_FAILURES, type EndingRow } from '../workflows/run/endings';
import { endingOf } from '../workflows/run/machine';
import { AgentExit } from '../activities/agent/script';
import { AttemptOutcome, TimelineKind, type Attempt, type Ending } from '../workflows/run/state';
import { outcomeOf } from '../workflows/zones/from-run';
import { OutcomeKind } from '../workflows/zones/memory';
import { offerIn, T0 } from './helpers/run-harness';

const HOUR = 3_600_000;
const rows = (): [Ending, EndingRow][] => ENDING_NAMES.map((e) => [e, ENDINGS[e]]);
const where = (pick: (row: EndingRow) => boolean): Ending[] => rows().filter(([, row]) => pick(row)).map(([e]) => e).sort();

describe('attempt endings: one table', () => {
  it('knows every exit the agent names, and ends the run on what no other VM would do differently', () => {
    for (const code of Object.values(AgentExit)) assert.ok(AGENT_EXITS[code], `agent exit ${code} has no row`);
    const ending = (exitCode: number, more: object = {}) => endingOf({ lifecycle: 'running', preempted: false, phase: 'failed', exitCode, ...more }, true);
    assert.deepEqual(ending(AgentExit.SetupFailed, { setupStep: { step: 2, of: 3 }, setupExitCode: 1 }), {
      outcome: AttemptOutcome.SetupFailed,
      exitCode: 71,
      reason: 'a setup command failed: setup command 2 of 3 exited with code 1',
    });
    assert.equal(ending(AgentExit.ImageUnavailable)?.outcome, AttemptOutcome.ImageUnavailable);
    assert.equal(ending(AgentExit.NoContainerRuntime)?.outcome, AttemptOutcome.ImageUnavailable);
    assert.equal(ending(69)?.outcome, AttemptOutcome.WorkdirUnavailable);
    assert.equal(ending(AgentExit.ContainerFailed)?.outcome, AttemptOutcome.Failed, 'a container the runtime could not start may start on another VM');
    assert.equal(ending(66)?.outcome, AttemptOutcome.Failed);
    for (const e of [AttemptOutcome.SetupFailed, AttemptOutcome.ImageUnavailable, AttemptOutcome.WorkdirUnavailable]) assert.equal(ENDINGS[e].next, Next.Fail);
  });

  it('keeps the stored strings of every outcome', () => {
    assert.deepEqual(Object.values(AttemptOutcome).sort(), [
      'completed', 'conflict', 'failed', 'image-unavailable', 'not-runnable', 'preempted', 'quota-exceeded', 'run-duration-reached', 'running', 'setup-failed', 'stockout', 'stopped', 'switched', 'wait-expired', 'workdir-unavailable',
    ]);
  });

  it('has one row for every ending and none for anything else', () => {
    const endings = Object.values(AttemptOutcome).filter((o) => o !== AttemptOutcome.Running);
    assert.deepEqual([...ENDING_NAMES].sort(), [...endings].sort());
    for (const [ending, row] of rows()) assert.ok(row, `${ending} has no row`);
  });

  it('names only members of each vocabulary it joins', () => {
    const member = <T>(set: Record<string, T>, value: T | undefined) => value === undefined || Object.values(set).includes(value);
    for (const [ending, row] of rows()) {
      assert.ok(member(TimelineKind, row.timeline), `${ending}: timeline ${row.timeline}`);
      assert.ok(member(ZoneEventKind, row.zoneEvent), `${ending}: zone event ${row.zoneEvent}`);
      assert.ok(member(OutcomeKind, row.memory), `${ending}: memory ${row.memory}`);
      assert.ok(member(FailureType, row.failure), `${ending}: failure ${row.failure}`);
      assert.ok(member(Next, row.next), `${ending}: next ${row.next}`);
    }
  });

  it('spells a preemption one way across every vocabulary', () => {
    const preempted = ENDINGS[AttemptOutcome.Preempted];
    assert.deepEqual(preempted, { zoneEvent: ZoneEventKind.Preempted, memory: OutcomeKind.Preempted, timeline: TimelineKind.Preempted, failure: FailureType.Preempted, next: Next.Resume, releaseBeside: true });
    // The same fact is the same string where the vocabularies share it.
    assert.equal(AttemptOutcome.Preempted, ZoneEventKind.Preempted);
    assert.equal(AttemptOutcome.Preempted, OutcomeKind.Preempted);
    assert.equal(AttemptOutcome.Preempted, TimelineKind.Preempted);
    // No other ending is a preemption by any of its columns.
    for (const pick of [(r: EndingRow) => r.zoneEvent === ZoneEventKind.Preempted, (r: EndingRow) => r.memory === OutcomeKind.Preempted, (r: EndingRow) => r.timeline === TimelineKind.Preempted, (r: EndingRow) => r.failure === FailureType.Preempted, (r: EndingRow) => r.next === Next.Resume]) {
      assert.deepEqual(where(pick), [AttemptOutcome.Preempted]);
    }
  });

  it('tells the zone memory a stockout exactly where the run cools the zone down for one', () => {
    assert.deepEqual(where((r) => r.memory === OutcomeKind.Stockout), where((r) => r.zoneEvent === ZoneEventKind.Stockout));
    assert.deepEqual(where((r) => r.zoneEvent === ZoneEventKind.Stockout), [AttemptOutcome.Stockout, AttemptOutcome.WaitExpired].sort());
  });

  it('tells the zone memory nothing of quota and name conflicts, and a release of every other ending', () => {
    assert.deepEqual(where((r) => r.memory === undefined), [AttemptOutcome.Conflict, AttemptOutcome.QuotaExceeded].sort());
    assert.deepEqual(where((r) => r.zoneEvent === ZoneEventKind.Quota), [AttemptOutcome.QuotaExceeded]);
    assert.deepEqual(where((r) => r.memory === OutcomeKind.Released), where((r) => r.zoneEvent === undefined && r.memory !== undefined));
  });

  it('reads every provision failure back to the one ending that names it', () => {
    const failures = rows().map(([, r]) => r.failure).filter((f) => f !== undefined);
    assert.equal(new Set(failures).size, failures.length, 'a failure names one ending');
    // Each failure a provision raises that a retry cannot fix ends its attempt; a bad spec ends the run before any.
    assert.deepEqual(Object.keys(PROVISION_FAILURES).sort(), nonRetryableFailureTypes.filter((f) => f !== FailureType.InvalidSpec).sort());
    for (const [failure, ending] of Object.entries(PROVISION_FAILURES)) {
      assert.equal(ENDINGS[ending].failure, failure);
      assert.notEqual(ENDINGS[ending].next, Next.Fail);
    }
  });

  it('moves to the next offer only after a create that failed, and fails the run only with a named failure', () => {
    for (const ending of where((r) => r.next === Next.NextOffer)) {
      const row = ENDINGS[ending];
      assert.ok(row.failure !== undefined && PROVISION_FAILURES[row.failure] === ending, `${ending}: a provision failure`);
      assert.equal(row.timeline, TimelineKind.AttemptFailed, ending);
      assert.equal(row.releaseBeside, true, `${ending}: nothing of a failed create can write`);
    }
    for (const ending of where((r) => r.next === Next.Fail)) {
      const row = ENDINGS[ending];
      assert.ok(row.failure !== undefined && !nonRetryableFailureTypes.includes(row.failure), `${ending}: the run's own failure`);
    }
  });

  it('is what the zone memory is told of each ending (zones/from-run.ts)', () => {
    const ran = { startedAt: new Date(T0).toISOString(), stoppedAt: new Date(T0 + HOUR).toISOString() };
    for (const [ending, row] of rows()) {
      const attempt: Attempt = { attempt: 1, ref: { backend: 'gce', name: 'vm-1', zone: 'us-central1-a' }, offer: offerIn('us-central1-a', 0.2), outcome: ending, released: true, ...ran };
      assert.equal(outcomeOf(attempt, T0 + 2 * HOUR)?.kind, row.memory, ending);
    }
  });
});
