/**
 * The scale benchmark's settings, validated once so a typo fails naming the flag and
 * how to fix it, before any process starts.
 */
import { resolve } from 'node:path';
import { formatDuration, isDurationString, parseDurationSeconds } from '../../workflows/api';

/** Which watching design to measure: the fleet observer, or each run looking at its own VM. */
export const ObserverChoice = { On: 'on', Off: 'off', Auto: 'auto' } as const;
export type ObserverChoice = (typeof ObserverChoice)[keyof typeof ObserverChoice];

export interface ScaleOptions {
  /** Concurrent training runs. */
  runs: number;
  /** Training time each run needs without interruption (seconds, emulated = real at time factor 1). */
  durationSeconds: number;
  /** Preemptions per running spot VM per hour, injected at random (Poisson, seeded). */
  preemptionRate: number;
  seed: number;
  /** Runs are started evenly over this many seconds. */
  rampSeconds: number;
  /** Give up (cancel what still runs) after this many seconds from the first start. */
  timeCapSeconds: number;
  /** `recovery.pollSeconds` of every run; undefined keeps the spec default. */
  pollSeconds?: number;
  /** Synthetic guests checkpoint every this many steps (one step per emulated second). */
  checkpointEverySteps: number;
  observer: ObserverChoice;
  /** Seconds between two looks of the fleet observer (when it runs). */
  observerIntervalSeconds?: number;
  /**
   * The worker's V8 heap limit (--max-old-space-size, MB); undefined is default tuning.
   * The SDK sizes its workflow cache from it: (heap - 200) x 600 / 1024 workflows.
   */
  workerHeapMb?: number;
  /** STERNA_MAX_CACHED_WORKFLOWS for the worker; undefined is the SDK's choice (default tuning). */
  workerCache?: number;
  /** Fetch the histories of at most this many runs (all when undefined). */
  historySample?: number;
  /** Keep the work directory (logs, emulator state) after the run. */
  keep: boolean;
  json: boolean;
  /**
   * 0: runs and fleet in the dev server's one namespace. N: the fleet in a system namespace
   * and the runs spread evenly over N team namespaces (docs/tenancy.md), one worker process serving all.
   */
  teamNamespaces: number;
  /** Write the worker's CPU profiles (`node --cpu-prof`, one per thread) here and summarize them in the result. */
  cpuProfileDir?: string;
}

export class ScaleOptionError extends Error {
  override name = 'ScaleOptionError';
}

function fail(flag: string, problem: string): never {
  throw new ScaleOptionError(`--${flag}: ${problem}`);
}

export function seconds(flag: string, text: string, min = 0): number {
  const value = isDurationString(text) ? parseDurationSeconds(text) : Number(text);
  if (!Number.isFinite(value) || value < min || (min === 0 && value <= 0)) {
    fail(flag, `expected a duration such as 90s, 10m or 1h (or seconds) above ${formatDuration(min)}, got "${text}"`);
  }
  return value;
}

export function wholeNumber(flag: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) fail(flag, `expected a whole number from ${min} to ${max}, got "${text}"`);
  return value;
}

export function rate(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0 || value > 3600) fail(flag, `expected preemptions per VM per hour, from 0 to 3600, got "${text}"`);
  return value;
}

export function observerChoice(text: string): ObserverChoice {
  const choices = Object.values(ObserverChoice) as string[];
  if (!choices.includes(text)) fail('observer', `expected one of ${choices.join(', ')}, got "${text}"`);
  return text as ObserverChoice;
}

/** Raw flag values as commander hands them over. */
export interface ScaleFlags {
  runs: string;
  duration: string;
  preemptionRate: string;
  seed: string;
  ramp?: string;
  timeCap?: string;
  pollSeconds?: string;
  checkpointEvery: string;
  observer: string;
  observerInterval?: string;
  historySample?: string;
  workerHeapMb?: string;
  workerCache?: string;
  teamNamespaces?: string;
  cpuProfile?: string;
  keep?: boolean;
  json?: boolean;
}

export function parseScaleOptions(flags: ScaleFlags): ScaleOptions {
  const runs = wholeNumber('runs', flags.runs, 1, 10_000);
  const durationSeconds = seconds('duration', flags.duration);
  // Spread the starts so the first placement of every run is not one burst: 10 a second.
  const rampSeconds = flags.ramp !== undefined ? seconds('ramp', flags.ramp) : Math.min(120, Math.max(5, runs / 10));
  const options: ScaleOptions = {
    runs,
    durationSeconds,
    preemptionRate: rate('preemption-rate', flags.preemptionRate),
    seed: wholeNumber('seed', flags.seed, 0, 2 ** 31),
    rampSeconds,
    // Room for the ramp, a slow start and a few preemptions per run.
    timeCapSeconds: flags.timeCap !== undefined ? seconds('time-cap', flags.timeCap) : Math.ceil(3 * durationSeconds + rampSeconds + 300),
    pollSeconds: flags.pollSeconds !== undefined ? seconds('poll-seconds', flags.pollSeconds) : undefined,
    checkpointEverySteps: wholeNumber('checkpoint-every', flags.checkpointEvery, 1),
    observer: observerChoice(flags.observer),
    observerIntervalSeconds: flags.observerInterval !== undefined ? seconds('observer-interval', flags.observerInterval) : undefined,
    workerHeapMb: flags.workerHeapMb !== undefined ? wholeNumber('worker-heap-mb', flags.workerHeapMb, 256, 65_536) : undefined,
    workerCache: flags.workerCache !== undefined ? wholeNumber('worker-cache', flags.workerCache, 0) : undefined,
    historySample: flags.historySample !== undefined ? wholeNumber('history-sample', flags.historySample, 1) : undefined,
    teamNamespaces: flags.teamNamespaces !== undefined ? wholeNumber('team-namespaces', flags.teamNamespaces, 0, 16) : 0,
    cpuProfileDir: flags.cpuProfile !== undefined ? resolve(flags.cpuProfile) : undefined,
    keep: flags.keep ?? false,
    json: flags.json ?? false,
  };
  if (options.pollSeconds !== undefined && (options.pollSeconds < 0.2 || options.pollSeconds > 60)) {
    fail('poll-seconds', `the spec allows recovery.pollSeconds from 0.2 to 60, got ${options.pollSeconds}`);
  }
  if (options.durationSeconds < 10) fail('duration', `runs must train at least 10s to be measured, got ${formatDuration(options.durationSeconds)}`);
  return options;
}
