/**
 * Whether any activity waited for a worker slot, read from the worker itself rather than
 * inferred from histories: the Temporal SDK core's own gauges
 * (`temporal_worker_task_slots_available` / `_used` for the `ActivityWorker`), scraped
 * from the worker's SDK exporter (workers/metrics.ts) every second. While free slots stay
 * above zero, no activity task can wait for a slot: the core polls for one whenever a
 * slot is free, so a slow start is the poll or the worker's threads, not the limit.
 */
import { sdkText } from '../../workers/metrics';

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

export class SlotSampler {
  private freeMin = Infinity;
  private usedMax = 0;
  private samples = 0;
  private readonly timer: NodeJS.Timeout;
  private inFlight = false;

  constructor(
    private readonly sdkMetricsPort: number,
    everyMs = 1000,
  ) {
    this.timer = setInterval(() => void this.sample(), everyMs);
    this.timer.unref();
  }

  private async sample(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      // An exporter not up yet, or a worker gone, answers '': a missed sample, not a figure.
      const slots = activitySlotsOf(await sdkText(this.sdkMetricsPort));
      if (slots) {
        this.freeMin = Math.min(this.freeMin, slots.free);
        this.usedMax = Math.max(this.usedMax, slots.used);
        this.samples += 1;
      }
    } finally {
      this.inFlight = false;
    }
  }

  /** Figures from here on (start-up excluded). */
  startMeasuring(): void {
    this.freeMin = Infinity;
    this.usedMax = 0;
    this.samples = 0;
  }

  figures(): ActivitySlots | undefined {
    return this.samples === 0 ? undefined : { freeMin: this.freeMin, usedMax: this.usedMax, samples: this.samples };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
