/**
 * Budget periods: calendar days, ISO weeks (from Monday) and months, all in UTC, so every
 * worker and every replay cuts them at the same instant. Pure.
 */
export const Period = { Day: 'day', Week: 'week', Month: 'month' } as const;
export type Period = (typeof Period)[keyof typeof Period];

export const PERIODS: readonly Period[] = [Period.Day, Period.Week, Period.Month];

const DAY_MS = 86_400_000;

/** Epoch ms at which the period containing `nowMs` began. */
export function periodStart(period: Period, nowMs: number): number {
  const d = new Date(nowMs);
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  switch (period) {
    case Period.Day:
      return midnight;
    case Period.Week:
      // getUTCDay: Sunday 0 … Saturday 6; weeks start on Monday.
      return midnight - ((d.getUTCDay() + 6) % 7) * DAY_MS;
    case Period.Month:
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  }
}

/** Epoch ms at which the period that began at `startMs` ends (the next one begins). */
export function periodEnd(period: Period, startMs: number): number {
  const d = new Date(startMs);
  switch (period) {
    case Period.Day:
      return startMs + DAY_MS;
    case Period.Week:
      return startMs + 7 * DAY_MS;
    case Period.Month:
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
}
