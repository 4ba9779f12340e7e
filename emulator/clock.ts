/**
 * Emulated time: `timeFactor` N makes emulated time run N times faster than real time.
 * A 30 s preemption notice lasts 30/N real seconds; a trace tick of gapSeconds lasts
 * gapSeconds/N real seconds. Timestamps the API returns stay real wall-clock time, so
 * clients that compute durations from them see real seconds.
 */
export class Clock {
  constructor(readonly timeFactor: number) {
    if (!(timeFactor > 0) || !Number.isFinite(timeFactor)) throw new Error(`time factor must be a positive number, got ${timeFactor}`);
  }

  now(): number {
    return Date.now();
  }

  /** Real milliseconds that `seconds` of emulated time take. */
  realMs(emulatedSeconds: number): number {
    return (emulatedSeconds * 1000) / this.timeFactor;
  }

  /** Emulated seconds in a real interval. */
  emulatedSeconds(realMs: number): number {
    return (realMs / 1000) * this.timeFactor;
  }
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
