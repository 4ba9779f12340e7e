/**
 * What a process costs, read from Linux's /proc: peak resident memory (VmHWM, the
 * kernel's own high-water mark, so no sample can miss a peak) and CPU time (user +
 * system, all threads, from /proc/<pid>/stat).
 */
import { readFileSync } from 'node:fs';

/** USER_HZ: the unit of utime and stime. 100 on every Linux the SDK supports. */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcessUsage {
  /** Peak resident set size so far (MB, 1 MB = 2^20 bytes). */
  peakRssMb: number;
  /** Resident set size now (MB). */
  rssMb: number;
  /** User + system CPU seconds since the process started. */
  cpuSeconds: number;
}

/** Undefined once the process is gone. */
export function processUsage(pid: number): ProcessUsage | undefined {
  let status: string;
  let stat: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return { peakRssMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024, cpuSeconds: (utime + stime) / CLOCK_TICKS_PER_SECOND };
}

/**
 * Samples a process every `everyMs` and keeps the last reading, so its figures survive
 * the process's exit. VmHWM already is a peak; sampling only keeps it readable.
 */
export class ProcessSampler {
  private last: ProcessUsage | undefined;
  private readonly timer: NodeJS.Timeout;
  private baselineCpu = 0;
  /** RSS readings (MB) since startMeasuring(), for the typical footprint beside the peak. */
  private readonly rss: number[] = [];

  constructor(
    readonly pid: number,
    everyMs = 1000,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  sample(): ProcessUsage | undefined {
    const now = processUsage(this.pid);
    if (now) {
      this.last = now;
      this.rss.push(now.rssMb);
    }
    return this.last;
  }

  /** CPU seconds from here on are what `usage()` reports (start-up excluded). */
  startMeasuring(): void {
    this.rss.length = 0;
    this.baselineCpu = this.sample()?.cpuSeconds ?? 0;
  }

  /** Median RSS over the measurement (MB). */
  medianRssMb(): number | undefined {
    if (this.rss.length === 0) return undefined;
    const sorted = [...this.rss].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  }

  usage(): ProcessUsage | undefined {
    const u = this.sample();
    return u && { ...u, cpuSeconds: u.cpuSeconds - this.baselineCpu };
  }

  stop(): ProcessUsage | undefined {
    const u = this.usage();
    clearInterval(this.timer);
    return u;
  }
}
