/**
 * Version B's cost rules, for the deploy test (test/worker-versioning.test.ts): the same
 * rules, except that the cost summary a run leaves in its memo says which rules wrote it.
 * Bundled in place of workflows/run/cost-refresh.ts; the `.js` path below is the original
 * module itself, which the bundler's replacement does not match.
 */
import { costMemoOf as costMemoOfA } from '../../../workflows/run/cost-refresh.js';

export * from '../../../workflows/run/cost-refresh.js';

export function costMemoOf(...args: Parameters<typeof costMemoOfA>): ReturnType<typeof costMemoOfA> & { rules: 'B' } {
  return { ...costMemoOfA(...args), rules: 'B' };
}
