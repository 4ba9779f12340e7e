/**
 * A placement's activities: the capacity on offer (with the zone memory, in the same
 * activity) and, once, where the data's buckets live;
 * answered together as the machine's `offers` event.
 */
import { isCancellation } from '@temporalio/workflow';
import type { runActivities } from '../run-activities';
import type { RunSpec } from '../spec';
import type { BucketAnswer, DatasetAnswer } from '../activity-contract';
import { datasetsToCheck } from './datasets';
import { bucketsToLocate } from './data-placement';
import type { RunEvent } from './machine';
import type { MemoryLink } from './memory-link';
import { capacityFound } from './prices';
import { capacityRequest } from './requests';
import type { RunState } from './state';

export class PlacementActs {
  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    private readonly acts: ReturnType<typeof runActivities>,
    private readonly memories: MemoryLink,
  ) {}

  /** The checks before the run; a worker that cannot check (given nothing to check with, or the activity failed) answers nothing. */
  async check(): Promise<Extract<RunEvent, { kind: 'checked' }>> {
    try {
      return { kind: 'checked', findings: await this.acts.checks.checkBeforeRun({ spec: this.spec }) };
    } catch (err) {
      if (isCancellation(err)) throw err;
      return { kind: 'checked' };
    }
  }

  async findCapacity(): Promise<Extract<RunEvent, { kind: 'offers' }>> {
    const [found, bucketLocations, datasets] = await Promise.all([
      this.acts.quick.findCapacity({ ...capacityRequest(this.spec), zoneMemoryFor: this.memories.zones.readWithCapacity() }),
      this.locateBuckets(),
      this.checkDatasets(),
    ]);
    return { kind: 'offers', ...capacityFound(found), ...(bucketLocations ? { bucketLocations } : {}), ...(datasets ? { datasets } : {}) };
  }

  /**
   * Whether the datasets exist, asked before the run's first VM (run/datasets.ts). A
   * worker or API that cannot answer costs the run nothing: the agent finds out, as before.
   */
  private async checkDatasets(): Promise<DatasetAnswer[] | undefined> {
    const uris = datasetsToCheck(this.spec, this.state);
    if (uris.length === 0) return undefined;
    try {
      return await this.acts.storage.checkDatasets({ uris });
    } catch (err) {
      if (isCancellation(err)) throw err;
      return undefined;
    }
  }

  /**
   * The storage API's word on the buckets of datasets without a stated location, asked
   * once (at the first placement). A worker or API that cannot answer costs the run
   * nothing but the weighing: every bucket is then "location unknown".
   */
  private async locateBuckets(): Promise<BucketAnswer[] | undefined> {
    const buckets = bucketsToLocate(this.spec, this.state);
    if (buckets.length === 0) return undefined;
    try {
      return await this.acts.storage.locateBuckets({ buckets });
    } catch (err) {
      if (isCancellation(err)) throw err;
      const cause = (err as { cause?: Error }).cause;
      const problem = `the storage activity failed: ${cause?.message ?? (err as Error)?.message ?? String(err)}`;
      return buckets.map((bucket) => ({ bucket, problem }));
    }
  }
}
