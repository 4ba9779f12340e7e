/**
 * What the fleet observer tells the zone memory: each preemption it sees, once, with
 * how long the VM ran (its listing's last start and stop). Pure: a function of the
 * observer's memory before and after one look, and that look's listing. A resource whose
 * listing does not say its accelerator is left to its run to tell (the memory files
 * everything by zone x accelerator x model); the memory counts a preemption told by
 * both once (by resource name).
 */
import { OutcomeKind, ProvisioningModel, resourceKey, type ZoneOutcome } from '../../workflows/api';
import type { FleetMemory } from '../fleet/memory';
import type { FleetResource } from '../providers/provider';

const HOUR_MS = 3_600_000;

function epochMs(iso: string | undefined): number | undefined {
  const ms = iso ? Date.parse(iso) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

export function fleetPreemptions(before: FleetMemory, after: FleetMemory, listing: readonly FleetResource[], nowMs: number): ZoneOutcome[] {
  const listed = new Map(listing.map((r) => [resourceKey(r.ref), r]));
  const outcomes: ZoneOutcome[] = [];
  for (const [key, entry] of Object.entries(after.resources)) {
    if (!entry.preempted || before.resources[key]?.preempted) continue;
    const resource = listed.get(key);
    if (!resource?.accelerator || !entry.ref.zone) continue;
    const startedMs = epochMs(resource.lastStartAt);
    // A preemption is often seen while the VM is still stopping, before GCE records its
    // stop: it ran until about now then (at most one look's interval more).
    const lastStopMs = epochMs(resource.lastStopAt);
    const stoppedMs = lastStopMs !== undefined && startedMs !== undefined && lastStopMs >= startedMs ? lastStopMs : nowMs;
    const ran = startedMs !== undefined && stoppedMs >= startedMs ? (stoppedMs - startedMs) / HOUR_MS : undefined;
    outcomes.push({
      zone: entry.ref.zone,
      accelerator: resource.accelerator,
      model: resource.provisioningModel ?? ProvisioningModel.Spot,
      kind: OutcomeKind.Preempted,
      at: Math.min(stoppedMs, nowMs),
      resource: entry.ref.name,
      ...(ran !== undefined ? { lifetimeHours: ran } : {}),
    });
  }
  return outcomes;
}
