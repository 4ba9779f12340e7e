/**
 * The dataset check before a run's first VM: a dataset whose object (or prefix) does not
 * exist would fail the agent's staging on every VM, so the run fails at once, naming the
 * field, with nothing created. Pure; the storage activity answers (activities/storage/datasets.ts).
 */
import type { DatasetAnswer } from '../activity-contract';
import { FailureType } from '../failures';
import type { RunSpec } from '../spec';
import type { RunState } from './state';

/** The URIs to check: before the run's first attempt only (a later placement stages what already staged once). */
export function datasetsToCheck(spec: RunSpec, state: RunState): string[] {
  if (state.attempts.length > 0) return [];
  return [...new Set(spec.datasets.map((d) => d.uri))];
}

/** The failure for the datasets the storage said are missing, or undefined when none is (an unknown answer is not missing). */
export function missingDatasets(spec: RunSpec, answers: readonly DatasetAnswer[]): { failure: FailureType; message: string } | undefined {
  const missing = new Map(answers.filter((a) => a.exists === false).map((a) => [a.uri, a.problem ?? 'not found']));
  if (missing.size === 0) return undefined;
  const named = spec.datasets.flatMap((d, i) => (missing.has(d.uri) ? [`datasets[${i}].uri ${d.uri}: ${missing.get(d.uri)}`] : []));
  return {
    failure: FailureType.InvalidSpec,
    message: `${named.join('; ')}; upload the data or fix the URI (checked before any VM was created; nothing was)`,
  };
}
