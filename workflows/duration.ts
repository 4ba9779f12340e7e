/** Durations in specs: a number of seconds, or a string such as "90s", "30m", "1h30m", "2d". */
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;
const DURATION = /^(?:\d+(?:\.\d+)?[smhd])+$/;

export const DAY_SECONDS = UNIT_SECONDS.d;

/**
 * The longest duration a spec may give (366 days). Long enough for any training run,
 * short enough that every sum the workflow makes with it (start + duration, now +
 * deadlineAfter) stays a valid `Date` and a timer Temporal accepts.
 */
export const MAX_DURATION_SECONDS = 366 * DAY_SECONDS;

export function isDurationString(text: string): boolean {
  return DURATION.test(text);
}

/** Seconds; may be Infinity for absurd strings ("9999…9d"), which validation then refuses. */
export function parseDurationSeconds(value: number | string): number {
  if (typeof value === 'number') return value;
  let total = 0;
  for (const [, amount, unit] of value.matchAll(/(\d+(?:\.\d+)?)([smhd])/g)) {
    total += Number(amount) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS];
  }
  return total;
}

/** The largest unit that divides `seconds` exactly, for messages: 31622400 -> "366d", 0.2 -> "0.2s". */
export function formatDuration(seconds: number): string {
  for (const unit of ['d', 'h', 'm'] as const) {
    const size = UNIT_SECONDS[unit];
    if (seconds >= size && Number.isInteger(seconds / size)) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}
