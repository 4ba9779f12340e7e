/**
 * `sterna zones`: what the project's zone memory says about each zone x accelerator x
 * model — the last stockout, preemptions per hour of spot time, the median spot
 * lifetime, and whether placement skips it now (in cooldown).
 *
 *   sterna zones
 *   sterna zones --project my-project --json
 *   sterna zones --cooldown 600        # as a run with recovery.zoneCooldown 600 sees it
 *
 * Reads only Temporal (a query per memory): no cloud API call.
 */
import type { Client } from '@temporalio/client';
import { type Command, InvalidArgumentError } from 'commander';
import { listZoneMemories, readZoneMemory, type ZoneMemoryRef } from '../activities/zones';
import { type Backend, DEFAULT_COOLDOWN_SECONDS, type ProvisioningModel, zoneMemoryWorkflowId, type ZonePrior, zonePriors } from '../workflows/api';
import { secondsOption } from './args';

/** One line of `sterna zones --json`: exactly these keys; null where the memory has no figure. */
export interface ZoneRow {
  zone: string;
  accelerator: string;
  model: ProvisioningModel;
  /** A gang's attempts are remembered apart, per node count; 1: single VMs. */
  nodes: number;
  lastStockout: string | null;
  preemptionsPerHour: number | null;
  medianSpotLifetimeHours: number | null;
  inCooldown: boolean;
}

export function zoneRow(p: ZonePrior): ZoneRow {
  return {
    zone: p.zone,
    accelerator: p.accelerator,
    model: p.model,
    nodes: p.nodes ?? 1,
    lastStockout: p.lastStockoutAt ?? null,
    preemptionsPerHour: p.preemptionsPerHour ?? null,
    medianSpotLifetimeHours: p.medianSpotLifetimeHours ?? null,
    inCooldown: p.inCooldown,
  };
}

function hours(h: number | null): string {
  if (h === null) return '-';
  return h < 1 ? `${Math.round(h * 60)} min` : `${h.toFixed(1)} h`;
}

/** The rows as an aligned table, with a header. */
export function zoneTable(rows: readonly ZoneRow[]): string[] {
  const cells = [
    ['ZONE', 'ACCELERATOR', 'MODEL', 'NODES', 'LAST STOCKOUT', 'PREEMPTIONS/H', 'MEDIAN SPOT LIFETIME', 'COOLDOWN'],
    ...rows.map((r) => [r.zone, r.accelerator, r.model, String(r.nodes), r.lastStockout ?? '-', r.preemptionsPerHour === null ? '-' : r.preemptionsPerHour.toFixed(2), hours(r.medianSpotLifetimeHours), r.inCooldown ? 'yes' : 'no']),
  ];
  const widths = cells[0].map((_, i) => Math.max(...cells.map((c) => c[i].length)));
  return cells.map((c) => c.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd());
}

function backendOption(value: string): Backend {
  if (value !== 'gce' && value !== 'gke') throw new InvalidArgumentError(`gce or gke; got ${JSON.stringify(value)}`);
  return value;
}

/** How long each listed memory has to answer before it is skipped. */
const LISTED_QUERY_MS = 10_000;

interface ZonesOptions {
  project?: string;
  backend: Backend;
  taskQueue: string;
  cooldown: number;
  json?: boolean;
}

async function memoriesToShow(client: Client, opts: ZonesOptions): Promise<ZoneMemoryRef[]> {
  // A named project is read directly (a memory started a moment ago may not be listed yet).
  if (opts.project) return [{ workflowId: zoneMemoryWorkflowId(opts.taskQueue, opts.backend, opts.project), taskQueue: opts.taskQueue, backend: opts.backend, scope: opts.project }];
  return listZoneMemories(client);
}

export function addZonesCommand(program: Command, connect: () => Promise<Client>): void {
  program
    .command('zones')
    .description('what the zone memory says: last stockout, preemptions per hour, median spot lifetime, cooldown, per zone x accelerator x model')
    .option('--project <scope>', 'only this project (GKE: cluster/namespace); by default every zone memory of the namespace')
    .option('--backend <backend>', 'with --project: gce or gke', backendOption, 'gce')
    .option('--task-queue <queue>', 'with --project: task queue of the Sterna workers', 'sterna')
    .option('--cooldown <seconds>', 'cooldown after a stockout, as a run\'s recovery.zoneCooldown', secondsOption, DEFAULT_COOLDOWN_SECONDS)
    .option('--json', 'print a JSON array of {zone, accelerator, model, lastStockout, preemptionsPerHour, medianSpotLifetimeHours, inCooldown}')
    .action(async (opts: ZonesOptions) => {
      const client = await connect();
      const now = Date.now();
      const groups: { ref: ZoneMemoryRef; rows: ZoneRow[] }[] = [];
      const refs = await memoriesToShow(client, opts);
      // Listing every memory: all are asked at once, and one nobody answers in time (no
      // worker polls its task queue) is said and skipped, not allowed to hide the others.
      // A named one must answer.
      const memories = await Promise.all(
        refs.map((ref) =>
          (opts.project ? readZoneMemory(client, ref.workflowId) : client.withDeadline(Date.now() + LISTED_QUERY_MS, () => readZoneMemory(client, ref.workflowId))).catch((err: unknown) => {
            if (opts.project) throw err;
            console.error(`sterna zones: skipped ${ref.workflowId}: ${err instanceof Error ? err.message : String(err)}`);
            return undefined;
          }),
        ),
      );
      refs.forEach((ref, i) => {
        const memory = memories[i];
        if (memory) groups.push({ ref, rows: zonePriors(memory, now, opts.cooldown).map(zoneRow) });
      });
      if (opts.json) {
        console.log(JSON.stringify(groups.flatMap((g) => g.rows)));
        return;
      }
      if (groups.every((g) => g.rows.length === 0)) {
        console.log('the zone memory is empty: no run has told it of a stockout, preemption or spot lifetime yet');
        return;
      }
      for (const g of groups.filter((x) => x.rows.length > 0)) {
        if (groups.length > 1) console.log(`${g.ref.backend} ${g.ref.scope} (task queue ${g.ref.taskQueue})`);
        for (const line of zoneTable(g.rows)) console.log(line);
      }
    });
}
