/**
 * Samples one of the worker's Prometheus expositions every `everyMs` while the benchmark
 * measures, folding each reading into figures: the activity slots (slots.ts) and the
 * memory split (memory.ts) are two readings of the same kind.
 */
import { sdkText } from '../../workers/metrics';

export class ExpositionSampler<R, F> {
  private folded: F | undefined;
  private readonly timer: NodeJS.Timeout;
  private inFlight = false;

  constructor(
    private readonly port: number,
    /** The reading in one exposition text; undefined when it lacks it. */
    private readonly read: (text: string) => R | undefined,
    /** The figures so far with one more reading. */
    private readonly fold: (figures: F | undefined, reading: R) => F,
    everyMs: number,
  ) {
    this.timer = setInterval(() => void this.sample(), everyMs);
    this.timer.unref();
  }

  private async sample(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      // An exporter not up yet, or a worker gone, answers '': a missed sample, not a figure.
      const reading = this.read(await sdkText(this.port));
      if (reading !== undefined) this.folded = this.fold(this.folded, reading);
    } finally {
      this.inFlight = false;
    }
  }

  /** Figures from here on (start-up excluded). */
  startMeasuring(): void {
    this.folded = undefined;
  }

  /** The figures; undefined when no sample read anything. */
  figures(): F | undefined {
    return this.folded;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
