/**
 * Billing: the ground truth a cost ledger is checked against.
 *
 * As on GCE, an instance is billed from the moment it starts RUNNING until it is
 * TERMINATED (the STOPPING period included: the GPUs are held until the VM stops), per
 * second, at the price in force; a price change (trace replay) starts a new segment.
 * GCE's one-minute minimum is not applied, so short test VMs bill exactly.
 *
 * Two clocks: `runningSeconds`/`costUsd` count real wall-clock seconds, the same clock
 * as the instance's timestamps (lastStartTimestamp, lastStopTimestamp, operation
 * endTime), so a ledger computed from those timestamps matches them.
 * `emulatedRunningSeconds`/`emulatedCostUsd` count emulated seconds (real x time
 * factor), so a trace hour replayed in one real second costs a realistic hour.
 */
import type { BillingRecord, EmulatorState, InstanceRecord } from './types';

/** A billing record as the admin API shows it: the record's instance, its totals, its segments as ISO times. */
export interface BillingSummary extends Omit<BillingRecord, 'segments'> {
  /** The price in force in the last segment, whole instance, USD/hour. */
  pricePerHour: number;
  /** Real seconds billed (RUNNING + STOPPING). */
  runningSeconds: number;
  costUsd: number;
  emulatedRunningSeconds: number;
  emulatedCostUsd: number;
  startedAt?: string;
  stoppedAt?: string;
  /** Still accruing (the instance has not stopped). */
  open: boolean;
  segments: { start: string; end?: string; pricePerHour: number; timeFactor: number }[];
}

export function billingRecordFor(state: EmulatorState, i: InstanceRecord): BillingRecord {
  let record = state.billing.find((b) => b.instanceId === i.id);
  if (!record) {
    record = {
      project: i.project,
      zone: i.zone,
      name: i.name,
      instanceId: i.id,
      labels: { ...i.labels },
      machineType: i.machineType,
      accelerator: i.gpus?.type,
      acceleratorCount: i.gpus?.count ?? 0,
      provisioningModel: i.provisioningModel,
      segments: [],
    };
    state.billing.push(record);
  }
  return record;
}

/** Starts (or, at a new price, continues) billing an instance at `atMs`. */
export function openSegment(state: EmulatorState, i: InstanceRecord, atMs: number, pricePerHour: number, timeFactor: number): void {
  const record = billingRecordFor(state, i);
  const last = record.segments[record.segments.length - 1];
  if (last && last.endMs === undefined) {
    if (last.pricePerHour === pricePerHour && last.timeFactor === timeFactor) return;
    last.endMs = atMs;
  }
  record.segments.push({ startMs: atMs, pricePerHour, timeFactor });
}

export function closeSegment(state: EmulatorState, i: InstanceRecord, atMs: number): void {
  const record = state.billing.find((b) => b.instanceId === i.id);
  const last = record?.segments[record.segments.length - 1];
  if (last && last.endMs === undefined) last.endMs = Math.max(atMs, last.startMs);
}

export function summarize(record: BillingRecord, nowMs: number): BillingSummary {
  let runningSeconds = 0;
  let costUsd = 0;
  let emulatedRunningSeconds = 0;
  let emulatedCostUsd = 0;
  for (const s of record.segments) {
    const seconds = ((s.endMs ?? nowMs) - s.startMs) / 1000;
    runningSeconds += seconds;
    costUsd += (seconds * s.pricePerHour) / 3600;
    emulatedRunningSeconds += seconds * s.timeFactor;
    emulatedCostUsd += (seconds * s.timeFactor * s.pricePerHour) / 3600;
  }
  const first = record.segments[0];
  const last = record.segments[record.segments.length - 1];
  return {
    project: record.project,
    zone: record.zone,
    name: record.name,
    instanceId: record.instanceId,
    labels: record.labels,
    machineType: record.machineType,
    accelerator: record.accelerator,
    acceleratorCount: record.acceleratorCount,
    provisioningModel: record.provisioningModel,
    pricePerHour: last?.pricePerHour ?? 0,
    runningSeconds,
    costUsd,
    emulatedRunningSeconds,
    emulatedCostUsd,
    startedAt: first ? new Date(first.startMs).toISOString() : undefined,
    stoppedAt: last?.endMs !== undefined ? new Date(last.endMs).toISOString() : undefined,
    open: last !== undefined && last.endMs === undefined,
    segments: record.segments.map((s) => ({ start: new Date(s.startMs).toISOString(), end: s.endMs !== undefined ? new Date(s.endMs).toISOString() : undefined, pricePerHour: s.pricePerHour, timeFactor: s.timeFactor })),
  };
}
