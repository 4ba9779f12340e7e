/**
 * Commander argument parsers: a malformed value is refused before anything talks to
 * Temporal, with the same rules the client applies (client/arguments.ts).
 */
import { InvalidArgumentError } from 'commander';
import { budgetProblem, deadlineProblem } from '../client/arguments';

export function usdArgument(value: string): number {
  // Number('') is 0 and Number(' 5 ') is 5: only a plain decimal is a budget.
  const usd = /^\s*$/.test(value) ? NaN : Number(value);
  const problem = budgetProblem(usd);
  if (problem) throw new InvalidArgumentError(problem.replace(/got .*$/, `got ${JSON.stringify(value)}`));
  return usd;
}

export function deadlineArgument(value: string): string {
  const problem = deadlineProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
}

export function secondsOption(value: string): number {
  const seconds = Number(value);
  if (!(Number.isFinite(seconds) && seconds > 0)) throw new InvalidArgumentError(`a positive number of seconds, e.g. 30; got ${JSON.stringify(value)}`);
  return seconds;
}

export function runIdArgument(value: string): string {
  if (!value.trim()) throw new InvalidArgumentError('a run id is the workflow id `sterna start` printed; `sterna list` shows them');
  return value;
}

/** Megabytes (10^6 bytes) as a whole number of bytes: the workdir cap. */
export function megabytesOption(value: string): number {
  const mb = /^\s*$/.test(value) ? NaN : Number(value);
  if (!(Number.isFinite(mb) && mb > 0 && mb <= 1e6)) throw new InvalidArgumentError(`a size in MB above 0, e.g. 250; got ${JSON.stringify(value)}`);
  return Math.round(mb * 1e6);
}
