/**
 * The storage activities: where a dataset's bucket lives (buckets.ts) and whether its
 * datasets are there (datasets.ts).
 */
import type { StorageActivities } from '../../workflows/api';
import type { BucketLocator } from './buckets';
import type { DatasetChecker } from './datasets';

export { BucketLocator, describeProblem, GCS_ENDPOINT, PROBLEM_TTL_MS, STORAGE_READ_SCOPE, type AuthorizedRequester, type BucketLocatorOptions } from './buckets';
export { DatasetChecker } from './datasets';

export function createStorageActivities(locator: BucketLocator | undefined, datasets?: DatasetChecker): StorageActivities {
  return {
    async locateBuckets({ buckets }) {
      if (!locator) return buckets.map((bucket) => ({ bucket, problem: 'this worker reads no bucket locations (no storage API configured, or STERNA_STORAGE_LOCATIONS=off)' }));
      return Promise.all(buckets.map((bucket) => locator.locate(bucket)));
    },
    async checkDatasets({ uris }) {
      if (!datasets) return uris.map((uri) => ({ uri, problem: 'this worker checks no datasets (no storage API configured, or STERNA_STORAGE_LOCATIONS=off)' }));
      return Promise.all(uris.map((uri) => datasets.check(uri)));
    },
  };
}
