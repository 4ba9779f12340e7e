/**
 * Keyed one-shot timers: at most one pending action per key (an instance's next status
 * change, an operation's completion). Timers are unref'd so a forgotten emulator never
 * holds a process open, and every deadline lives in the state too, so a restarted
 * emulator re-arms what was pending.
 */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export class Scheduler {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly onError: (err: unknown) => void) {}

  /** Runs `fn` at epoch time `atMs` (now if past), replacing any action pending under `key`. */
  at(key: string, atMs: number, fn: () => void): void {
    if (this.closed) return;
    this.cancel(key);
    const delay = Math.max(0, atMs - Date.now());
    // setTimeout fires at once beyond 2^31-1 ms (24.8 days); a VM time limit may be 120 days.
    if (delay > MAX_TIMEOUT_MS) {
      const hop = setTimeout(() => this.at(key, atMs, fn), MAX_TIMEOUT_MS);
      hop.unref();
      this.timers.set(key, hop);
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      try {
        fn();
      } catch (err) {
        this.onError(err);
      }
    }, delay);
    timer.unref();
    this.timers.set(key, timer);
  }

  cancel(key: string): void {
    const timer = this.timers.get(key);
    if (timer) clearTimeout(timer);
    this.timers.delete(key);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
