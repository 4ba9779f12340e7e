/**
 * A run's result within a bound: a run that does not end in time fails the test with
 * what it was doing (phase, attempt, its last timeline events), not with mocha's bare
 * timeout, so a hang seen once in CI says where it hung.
 */
import { strict as assert } from 'node:assert';
import { type Client, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { statusQuery } from '../../workflows/messages';
import type { RunStatus } from '../../workflows/run/views';
import type { trainingRun } from '../../workflows/run/training-run';

type Run = WorkflowHandle<typeof trainingRun>;

/** A run's timeline as lines for a failure message (its last `last` events; all by default). */
export function timelineLines(timeline: { at: string; kind: string; event: string }[], last = timeline.length): string {
  return timeline
    .slice(-last)
    .map((e) => `  ${e.at} ${e.kind}: ${e.event}`)
    .join('\n');
}

/** Where a run is, for a failure message: phase, attempt, step, last checkpoint and its last timeline events. */
export function whereRunIs(status: RunStatus, last = 15): string {
  return `phase ${status.phase}, attempt ${status.attempt ?? '-'}, step ${status.step ?? '-'}, checkpoint ${status.lastCheckpoint?.step ?? '-'}; last events:\n${timelineLines(status.timeline, last)}`;
}

export async function resultWithin(run: Run, timeoutMs: number): Promise<Awaited<ReturnType<Run['result']>>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  try {
    const ended = await Promise.race([run.result(), late]);
    if (ended !== 'late') return ended;
  } finally {
    clearTimeout(timer);
  }
  const status = await run.query(statusQuery).catch(() => undefined);
  const where = status ? whereRunIs(status) : 'its status could not be read';
  throw new Error(`run ${run.workflowId} did not end within ${timeoutMs / 1000} s: ${where}`);
}

/** The named failure a run (or any workflow) ended with; fails the test if it completed or ended otherwise. */
export async function failureOf(handle: WorkflowHandle): Promise<ApplicationFailure> {
  const err = await handle.result().then(
    () => assert.fail('the run should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure, String(err));
  return err.cause;
}

/** The workflow types on `taskQueue` in `client`'s namespace, sorted. */
export async function typesIn(client: Client, taskQueue: string): Promise<string[]> {
  const types = new Set<string>();
  for await (const w of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` })) types.add(w.type);
  return [...types].sort();
}
