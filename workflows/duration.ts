/** Durations in specs: a number of seconds, or a string such as "90s", "30m", "1h30m", "2d". */
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;
const DURATION = /^(?:\d+(?:\.\d+)?[smhd])+$/;

export function isDurationString(text: string): boolean {
  return DURATION.test(text);
}

export function parseDurationSeconds(value: number | string): number {
  if (typeof value === 'number') return value;
  let total = 0;
  for (const [, amount, unit] of value.matchAll(/(\d+(?:\.\d+)?)([smhd])/g)) {
    total += Number(amount) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS];
  }
  return total;
}
