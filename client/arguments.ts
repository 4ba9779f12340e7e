/**
 * The form of each value a client call takes, checked before anything is sent: a
 * malformed budget should not wait for a worker to say so. Whether the value suits the
 * run (a budget above what it has spent, a deadline still ahead) is the run's own
 * validator's call, since only the run knows.
 */

/** Why `usd` cannot be a budget, or undefined if it can. */
export function budgetProblem(usd: number): string | undefined {
  return Number.isFinite(usd) && usd > 0 ? undefined : `a budget is a positive number of USD, e.g. 20 or 7.50; got ${String(usd)}`;
}

/** Why `at` cannot be a deadline, or undefined if it can. */
export function deadlineProblem(at: string): string | undefined {
  return Number.isNaN(Date.parse(at)) ? `a deadline is an ISO 8601 time, e.g. 2030-01-31T18:00:00Z; got ${JSON.stringify(at)}` : undefined;
}
