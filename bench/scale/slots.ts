/**
 * Whether any activity waited for a worker slot, read from the worker itself rather than
 * inferred from histories: the Temporal SDK core's own gauges
 * (`temporal_worker_task_slots_available` / `_used` for the `ActivityWorker`), scraped
 * from the worker's SDK exporter (workers/metrics.ts) every second. While free slots stay
 * above zero, no activity task can wait for a slot: the core polls for one whenever a
 * slot is free, so a slow start is the poll or the worker's threads, not the limit.
 */
import { ExpositionSampler } from './exposition';

const GAUGE = /^temporal_worker_task_slots_(available|used)\{([^}]*)\} (\d+(?:\.\d+)?)$/gm;

export interface ActivitySlots {
  /** The fewest free activity slots seen in one sample. */
  freeMin: number;
  /** The most activity slots in use in one sample. */
  usedMax: number;
  /** Scrapes that read both gauges. */
  samples: number;
}

/** The activity worker's free and used slots in one exposition text; undefined without them. */
export function activitySlotsOf(text: string): { free: number; used: number } | undefined {
  let free: number | undefined;
  let used: number | undefined;
  for (const [, kind, labels, value] of text.matchAll(GAUGE)) {
    if (!/worker_type="ActivityWorker"/.test(labels)) continue;
    if (kind === 'available') free = Number(value);
    else used = Number(value);
  }
  return free === undefined || used === undefined ? undefined : { free, used };
}

/** The activity slots, sampled every second from the worker's SDK exporter. */
export class SlotSampler extends ExpositionSampler<{ free: number; used: number }, ActivitySlots> {
  constructor(sdkMetricsPort: number, everyMs = 1000) {
    super(sdkMetricsPort, activitySlotsOf, (f, slots) => ({ freeMin: Math.min(f?.freeMin ?? Infinity, slots.free), usedMax: Math.max(f?.usedMax ?? 0, slots.used), samples: (f?.samples ?? 0) + 1 }), everyMs);
  }
}
