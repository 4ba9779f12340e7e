/**
 * A plan before anything is paid for: every way the run could be placed (accelerator and
 * count, zone, spot or on-demand) with its predicted hours, cost, finish time and risk of
 * missing the deadline, and the one the run itself would try first.
 *
 * The model, stated so a reader can check it:
 * - Work: `time.expectedDuration` is on the first accelerator choice; another choice
 *   takes it scaled by relative throughput (plan/throughput.ts).
 * - Spot preemptions arrive as a Poisson process of rate λ per hour per zone and
 *   accelerator (the project's zone memory where it has seen spot hours there, else
 *   PRIOR_PREEMPTIONS_PER_HOUR). Each costs the
 *   work since the last checkpoint (half an interval on average) plus a restart
 *   (RESTART_SECONDS: provision, stage, resume). Expected hours = work / (1 - λ·loss).
 * - Risk: the chance that more preemptions come than the slack before the deadline
 *   absorbs, P(N > slack / loss) with N ~ Poisson(λ · expected hours). On-demand is not
 *   preempted: its risk is 0 or 1.
 * Waiting for capacity is not modelled: a plan prices what is offered now.
 */
import { deadlineMs } from '../pricing';
import { nextCandidate, triedKey } from '../run/machine';
import { startingState } from '../run/requests';
import type { RunSpec } from '../spec';
import type { Offer } from '../types';
import { zonePrior, type ZoneMemory } from '../zones/memory';
import { throughputOf, type ThroughputSource } from './throughput';
import { checkpointInterval } from '../run/checkpoint-interval';

/** One preemption a day: a prior for a zone nothing is known of, not a measurement. */
export const PRIOR_PREEMPTIONS_PER_HOUR = 1 / 24;
/** Provision, stage and resume after a preemption: a prior, not a measurement. */
export const RESTART_SECONDS = 300;

export interface PlanInputs {
  spec: RunSpec;
  offers: readonly Offer[];
  nowMs: number;
  /** What the project has seen (its zone memory): observed preemption rates, and placement's own prior. */
  memory?: ZoneMemory;
}

export interface PlanRow {
  accelerator: string;
  acceleratorCount: number;
  zone: string;
  region: string;
  provisioningModel: Offer['provisioningModel'];
  pricePerHour: number;
  /** Hours of work on this choice without interruption. */
  workHours: number;
  /** Expected hours including the work lost to preemptions and the restarts. */
  expectedHours: number;
  expectedCostUsd: number;
  expectedPreemptions: number;
  /** When it would finish if started now (ISO); absent when it never would. */
  finishAt?: string;
  /** Chance of missing the deadline, 0..1; absent without a deadline. */
  missRisk?: number;
  /** Preemptions per hour used, and whether from what the project saw or the prior. */
  preemptionsPerHour: number;
  preemptionSource: 'observed' | 'prior' | 'none';
  throughputSource: ThroughputSource;
  /** The choice the run would try first. */
  pick: boolean;
}

export interface Plan {
  rows: PlanRow[];
  /** Offers the plan could not predict (no throughput figure for the accelerator), as accelerator names. */
  unpredictable: string[];
  /** Why no row is marked as the pick, when none is. */
  noPick?: string;
  deadline?: string;
}

export function predictPlan({ spec, offers, nowMs, memory }: PlanInputs): Plan {
  const expected = spec.time.expectedDuration;
  const reference = spec.resources.accelerators[0];
  const own = spec.time.relativeThroughput;
  const referenceThroughput = throughputOf(reference.type, reference.count, own);
  const deadline = deadlineMs(spec, nowMs);
  // The interval each attempt would get in that zone (a pinned one, or the policy's).
  const lossHoursAt = (rate: number) =>
    (checkpointInterval({ preemptionsPerHour: rate, pinnedSeconds: spec.checkpoint.interval, capSeconds: spec.checkpoint.maxInterval }).seconds / 2 + RESTART_SECONDS) / 3600;
  const pick = firstChoice(spec, offers, nowMs, memory);
  const rows: PlanRow[] = [];
  const unpredictable = new Set<string>();
  for (const offer of offers) {
    const throughput = throughputOf(offer.accelerator, offer.acceleratorCount, own);
    if (!throughput || !referenceThroughput || expected === undefined) {
      unpredictable.add(offer.accelerator);
      continue;
    }
    const workHours = ((expected / 3600) * referenceThroughput.value) / throughput.value;
    const spot = offer.provisioningModel === 'SPOT';
    const observed = memory ? zonePrior(memory, { zone: offer.zone, accelerator: offer.accelerator, model: offer.provisioningModel }, nowMs).preemptionsPerHour : undefined;
    const rate = spot ? (observed ?? PRIOR_PREEMPTIONS_PER_HOUR) : 0;
    const lossHours = lossHoursAt(rate);
    const lostShare = rate * lossHours;
    const expectedHours = lostShare < 1 ? workHours / (1 - lostShare) : Infinity;
    const finishMs = nowMs + expectedHours * 3_600_000;
    rows.push({
      accelerator: offer.accelerator,
      acceleratorCount: offer.acceleratorCount,
      zone: offer.zone,
      region: offer.region,
      provisioningModel: offer.provisioningModel,
      pricePerHour: offer.pricePerHour,
      workHours,
      expectedHours,
      expectedCostUsd: offer.pricePerHour * expectedHours,
      expectedPreemptions: rate * expectedHours,
      finishAt: Number.isFinite(finishMs) ? new Date(finishMs).toISOString() : undefined,
      missRisk: deadline === undefined ? undefined : missRisk((deadline - nowMs) / 3_600_000 - workHours, rate * expectedHours, lossHours),
      preemptionsPerHour: rate,
      preemptionSource: spot ? (observed === undefined ? 'prior' : 'observed') : 'none',
      throughputSource: throughput.source,
      pick: pick !== undefined && sameChoice(pick, offer),
    });
  }
  rows.sort((a, b) => a.expectedCostUsd - b.expectedCostUsd || (a.missRisk ?? 0) - (b.missRisk ?? 0));
  return {
    rows,
    unpredictable: [...unpredictable],
    noPick: pick ? undefined : expected === undefined ? undefined : 'the run would wait: no offer is acceptable now',
    deadline: deadline === undefined ? undefined : new Date(deadline).toISOString(),
  };
}

/** P(N > slack / loss) for N ~ Poisson(mean): the deadline is missed when preemptions eat more than the slack. */
export function missRisk(slackHours: number, meanPreemptions: number, lossHours: number): number {
  if (slackHours < 0) return 1;
  if (meanPreemptions <= 0) return 0;
  const absorbed = Math.floor(slackHours / lossHours);
  // Sum the Poisson terms up to `absorbed` in a numerically tame way (term by term).
  let term = Math.exp(-meanPreemptions);
  let cdf = term;
  for (let k = 1; k <= absorbed && term > 0; k++) {
    term *= meanPreemptions / k;
    cdf += term;
  }
  return Math.min(1, Math.max(0, 1 - cdf));
}

/** What the run would try first with these offers: the machine's own choice, on a fresh state. */
function firstChoice(spec: RunSpec, offers: readonly Offer[], nowMs: number, memory: ZoneMemory | undefined): Offer | undefined {
  const state = startingState(spec, 'plan', nowMs);
  state.placement = { offers: [...offers], tried: [] };
  state.zoneMemory = memory;
  return nextCandidate(state, spec, nowMs);
}

function sameChoice(a: Offer, b: Offer): boolean {
  return triedKey(a) === triedKey(b);
}
