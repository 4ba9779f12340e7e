/**
 * A plan before anything is paid for: every way the run could be placed (accelerator and
 * count, zone, spot or on-demand) with its predicted hours, cost, finish time and risk of
 * missing the deadline, and the one the run itself would try first.
 *
 * The model, stated so a reader can check it:
 * - Work: measured where runs of the same spec (by name) trained before (plan/measured.ts):
 *   the run's total steps (monitoring.totalSteps, or the trainer's last report) over the
 *   steps per second measured on that accelerator. Otherwise `time.expectedDuration`,
 *   which is on the first accelerator choice, scaled to another by relative throughput
 *   (the spec's figures, else the datasheet table, plan/throughput.ts); when some
 *   accelerator was measured and the total steps are known, the work on it is the anchor
 *   that the relative figures scale instead. Each row says which source it used.
 * - Nodes: a gang of N nodes (resources.nodes) pays N VMs: cost = price x N x hours. The
 *   expected duration is stated for the gang the spec asks for; measured rates are per
 *   GPU and scale with every GPU of the gang (linear, data parallel). A gang is
 *   preempted when any of its N nodes is, so its rate is N x the zone's.
 * - Slices (GKE): a MIG partition or a time-shared GPU trains at its share of the GPU,
 *   the same share it is priced at (pricing-slices.ts `gpuEquivalent`: c/7 for `<c>g.*`,
 *   1/N shared by N): measured rates are kept per whole-GPU equivalent.
 * - Spot preemptions arrive as a Poisson process of rate λ per hour per zone and
 *   accelerator (the project's zone memory where it has seen spot hours there, else
 *   PRIOR_PREEMPTIONS_PER_HOUR). Each costs what earlier runs of the spec measured a
 *   preemption to cost (restart and lost work, plan/measured.ts), else the work since the
 *   last checkpoint (half an interval on average) plus a restart (RESTART_SECONDS:
 *   provision, stage, resume). Expected hours = work / (1 - λ·loss).
 * - Risk: the chance that more preemptions come than the slack before the deadline
 *   absorbs, P(N > slack / loss) with N ~ Poisson(λ · expected hours). On-demand is not
 *   preempted: its risk is 0 or 1.
 * Waiting for capacity is not modelled: a plan prices what is offered now.
 */
import { deadlineMs } from '../pricing';
import { nextCandidate } from '../run/placing';
import { triedKey } from '../run/policy-inputs';
import { gangSize } from '../run/gang';
import { describeSlice, type GpuSlice } from '../gpu-slices';
import { gpuEquivalent } from '../pricing-slices';
import { startingState } from '../run/requests';
import type { RunSpec } from '../spec';
import type { Offer } from '../types';
import { zonePrior, type ZoneMemory } from '../zones/memory';
import { throughputOf } from './throughput';
import type { MeasuredLoss, MeasuredThroughput } from './measured';
import { checkpointInterval } from '../run/checkpoint-interval';
import type { Plan, PlanRow, PlanWork, ThroughputSource } from './contract';

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
  /** Steps per second runs of this spec measured, by accelerator (the throughput memory). */
  measured?: MeasuredThroughput;
  /** What a preemption cost runs of this spec (the throughput memory). */
  measuredLoss?: MeasuredLoss;
}

export function predictPlan({ spec, offers, nowMs, memory, measured = {}, measuredLoss }: PlanInputs): Plan {
  const nodes = spec.resources.nodes;
  const deadline = deadlineMs(spec, nowMs);
  const work = workOf(spec, measured);
  // The interval each attempt would get in that zone (a pinned one, or the policy's).
  const lossSecondsAt = (rate: number) =>
    measuredLoss
      ? measuredLoss.seconds
      : checkpointInterval({ preemptionsPerHour: rate, pinnedSeconds: spec.checkpoint.interval, capSeconds: spec.checkpoint.maxInterval }).seconds / 2 + RESTART_SECONDS;
  const pick = firstChoice(spec, offers, nowMs, memory);
  const rows: PlanRow[] = [];
  const unpredictable = new Set<string>();
  for (const offer of offers) {
    const speed = work && workHoursOn(offer, nodes, work, spec, measured);
    if (!speed) {
      unpredictable.add(offer.accelerator);
      continue;
    }
    const workHours = speed.hours;
    const spot = offer.provisioningModel === 'SPOT';
    const observed = memory ? zonePrior(memory, { zone: offer.zone, accelerator: offer.accelerator, model: offer.provisioningModel }, nowMs).preemptionsPerHour : undefined;
    // A gang is preempted when any one of its nodes is.
    const rate = spot ? (observed ?? PRIOR_PREEMPTIONS_PER_HOUR) * nodes : 0;
    const lossSeconds = lossSecondsAt(rate);
    const lossHours = lossSeconds / 3600;
    const lostShare = rate * lossHours;
    const expectedHours = lostShare < 1 ? workHours / (1 - lostShare) : Infinity;
    const finishMs = nowMs + expectedHours * 3_600_000;
    // One VM's price: a gang's offer (GCE, run/gang.ts) is already priced for all its nodes.
    const vmPricePerHour = offer.pricePerHour / gangSize(offer);
    const slice = describeSlice(offer);
    rows.push({
      accelerator: offer.accelerator,
      ...(slice ? { slice } : {}),
      acceleratorCount: offer.acceleratorCount,
      zone: offer.zone,
      region: offer.region,
      provisioningModel: offer.provisioningModel,
      pricePerHour: vmPricePerHour,
      nodes,
      workHours,
      workCostUsd: vmPricePerHour * nodes * workHours,
      expectedHours,
      expectedCostUsd: vmPricePerHour * nodes * expectedHours,
      expectedPreemptions: rate * expectedHours,
      finishAt: Number.isFinite(finishMs) ? new Date(finishMs).toISOString() : undefined,
      missRisk: deadline === undefined ? undefined : missRisk((deadline - nowMs) / 3_600_000 - workHours, rate * expectedHours, lossHours),
      preemptionsPerHour: rate,
      preemptionSource: spot ? (observed === undefined ? 'prior' : 'observed') : 'none',
      lossSeconds,
      lossSource: measuredLoss ? 'measured' : 'prior',
      throughputSource: speed.source,
      ...(speed.stepsPerSecond !== undefined ? { stepsPerSecond: speed.stepsPerSecond } : {}),
      pick: pick !== undefined && sameChoice(pick, offer),
    });
  }
  rows.sort((a, b) => a.expectedCostUsd - b.expectedCostUsd || (a.missRisk ?? 0) - (b.missRisk ?? 0));
  return {
    rows,
    unpredictable: [...unpredictable],
    noPick: pick ? undefined : work === undefined ? undefined : 'the run would wait: no offer is acceptable now',
    deadline: deadline === undefined ? undefined : new Date(deadline).toISOString(),
    ...(work ? { work } : {}),
  };
}

/**
 * What the work is anchored on: total steps over a measured rate when the total is known
 * and some accelerator of the spec was measured (the first listed if it was), else the
 * expected duration on the first accelerator; undefined when there is neither.
 */
export function workOf(spec: RunSpec, measured: MeasuredThroughput): PlanWork | undefined {
  const nodes = spec.resources.nodes;
  const listed = spec.resources.accelerators;
  const totalSteps = spec.monitoring.totalSteps ?? listed.map((a) => measured[a.type]?.totalSteps).find((t) => t !== undefined);
  // The first accelerator listed if it was measured, else the one measured longest.
  const anchor = measured[listed[0].type] ? listed[0] : listed.filter((a) => measured[a.type]).sort((a, b) => measured[b.type].seconds - measured[a.type].seconds)[0];
  if (totalSteps !== undefined && anchor) {
    const m = measured[anchor.type];
    return {
      basis: 'measured-steps',
      accelerator: anchor.type,
      acceleratorCount: anchor.count,
      ...sliceOf(anchor),
      hours: totalSteps / (m.stepsPerGpuSecond * gpuEquivalent(anchor.count, anchor) * nodes) / 3600,
      totalSteps,
      stepsPerGpuSecond: m.stepsPerGpuSecond,
      measuredSeconds: m.seconds,
    };
  }
  const expected = spec.time.expectedDuration;
  if (expected === undefined) return undefined;
  return { basis: 'expected-duration', accelerator: listed[0].type, acceleratorCount: listed[0].count, ...sliceOf(listed[0]), hours: expected / 3600 };
}

function sliceOf(s: GpuSlice): GpuSlice {
  return { ...(s.partition !== undefined ? { partition: s.partition } : {}), ...(s.maxSharedClients !== undefined ? { maxSharedClients: s.maxSharedClients } : {}) };
}

/**
 * Hours of work on one offer: the anchor's hours scaled by measured rates when both the
 * offer's accelerator and the anchor's were measured, else by relative throughput (the
 * spec's or the datasheet's); undefined when the offer's accelerator has no figure.
 */
function workHoursOn(offer: Offer, nodes: number, work: PlanWork, spec: RunSpec, measured: MeasuredThroughput): { hours: number; source: ThroughputSource; stepsPerSecond?: number } | undefined {
  // Whole-GPU equivalents: a slice trains at the share it is priced at.
  const gpus = gpuEquivalent(offer.acceleratorCount, offer) * nodes;
  const anchorGpus = gpuEquivalent(work.acceleratorCount, work) * nodes;
  const own = measured[offer.accelerator];
  const anchorMeasured = measured[work.accelerator];
  if (own && anchorMeasured) {
    const stepsPerSecond = own.stepsPerGpuSecond * gpus;
    return { hours: (work.hours * anchorMeasured.stepsPerGpuSecond * anchorGpus) / stepsPerSecond, source: 'measured', stepsPerSecond };
  }
  const theirs = throughputOf(offer.accelerator, gpus, spec.time.relativeThroughput);
  const anchors = throughputOf(work.accelerator, anchorGpus, spec.time.relativeThroughput);
  if (!theirs || !anchors) return undefined;
  const stated = work.basis === 'expected-duration' && offer.accelerator === work.accelerator && gpus === anchorGpus;
  return { hours: (work.hours * anchors.value) / theirs.value, source: stated ? 'expected' : theirs.source };
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
  // A scratch state of the plan's own: the choice may note itself in it (the policy's state, a timeline line).
  const state = { ...startingState(spec, 'plan', nowMs), placement: { offers: [...offers], tried: [] }, zoneMemory: memory };
  return nextCandidate(state, spec, nowMs);
}

function sameChoice(a: Offer, b: Offer): boolean {
  return triedKey(a) === triedKey(b);
}
