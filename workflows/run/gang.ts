/**
 * Gang runs: N nodes (VMs) per attempt, in one zone, all or nothing. The rules are pure,
 * shared by the run (which hears of each node on its own) and the provider (which looks
 * at all of them at once):
 *
 *   names      the attempt's name is the gang's; node <rank> is `<name>-n<rank>`
 *              (nodes = 1: the attempt's name itself, exactly as before gangs)
 *   inputs     every node gets STERNA_NODE_RANK, STERNA_NUM_NODES, STERNA_MASTER_ADDR /
 *              STERNA_MASTER_PORT (rank 0's internal address), as torchrun expects
 *   verdict    rank 0 speaks for the gang (its steps, checkpoints, exit); any other rank
 *              speaks only when it is lost (stopped, gone: the gang is preempted, since a
 *              gang is only as alive as its weakest node), noticed a preemption, or failed
 *   release    every node, each only if it is ours; the gang's window spans them all
 */
import type { GangInputs, ProvisionRequest, ReleaseResult } from '../activity-contract';
import { RankLabel } from '../naming';
import type { AgentSnapshot, Offer, ResourceObservation, ResourceRef } from '../types';

/** The port rank 0 listens on for its peers: torchrun's default. */
export const DEFAULT_MASTER_PORT = 29500;

/** How many nodes a resource (or an offer) is: 1 unless it says more. */
export function gangSize(of: { nodes?: number }): number {
  return of.nodes !== undefined && of.nodes > 1 ? of.nodes : 1;
}

/**
 * The attempt's resource for an offer: a GCE gang's says how many VMs it is; a single
 * node's is unchanged. A GKE gang is one Job (its provider watches the pods), so its ref
 * names the Job alone.
 */
export function gangRef(ref: ResourceRef, offer: Offer): ResourceRef {
  return gangSize(offer) > 1 && offer.backend === 'gce' ? { ...ref, nodes: gangSize(offer) } : ref;
}

/** The name of node `rank` of the gang named `name`; a single node keeps the name itself. */
export function nodeName(name: string, rank: number, nodes: number): string {
  return nodes > 1 ? `${name}-n${rank}` : name;
}

/** Every node of a resource, rank 0 first, each a plain single-node ref. */
export function nodeRefs(ref: ResourceRef): ResourceRef[] {
  const nodes = gangSize(ref);
  if (nodes === 1) return [ref];
  return Array.from({ length: nodes }, (_, rank) => ({ backend: ref.backend, name: nodeName(ref.name, rank, nodes), zone: ref.zone, ...(ref.namespace ? { namespace: ref.namespace } : {}) }));
}

/** The rank of the node called `name` in the gang `ref`, or undefined when it is none of its nodes. */
export function rankIn(ref: ResourceRef, name: string): number | undefined {
  const nodes = gangSize(ref);
  if (nodes === 1) return name === ref.name ? 0 : undefined;
  const match = /^(.*)-n(\d{1,2})$/.exec(name);
  if (!match || match[1] !== ref.name) return undefined;
  const rank = Number(match[2]);
  return String(rank) === match[2] && rank < nodes ? rank : undefined;
}

/** True when `name` is the resource's own or one of its nodes'. */
export function namesPartOf(ref: ResourceRef, name: string): boolean {
  return name === ref.name || rankIn(ref, name) !== undefined;
}

/**
 * Node `rank`'s own create request: its name, its rank label, and its agent's gang
 * inputs (rank 0 learns its own address on the VM; the others are given rank 0's).
 */
export function nodeRequest(request: ProvisionRequest, rank: number, nodes: number, meet: { masterAddr?: string; masterPort: number }): ProvisionRequest {
  const gang: GangInputs = { rank, nodes, ...(meet.masterAddr ? { masterAddr: meet.masterAddr } : {}), masterPort: meet.masterPort };
  return { ...request, name: nodeName(request.name, rank, nodes), labels: { ...request.labels, [RankLabel]: String(rank) }, agent: { ...request.agent, gang } };
}

function isLost(s: AgentSnapshot): boolean {
  return s.lifecycle === 'terminated' || s.lifecycle === 'gone';
}

function isFailed(s: AgentSnapshot): boolean {
  return s.phase === 'failed' || (s.phase === 'exited' && s.exitCode !== undefined && s.exitCode !== 0 && !s.preempted);
}

/**
 * What one node's snapshot says of the gang. Rank 0 speaks for it; another rank only
 * when it is lost (the gang ends as preempted), failed (the gang failed), or has a
 * preemption notice (the gang drains); otherwise it says nothing (undefined). Its exit 0
 * says nothing either: the gang completes when rank 0 does.
 */
export function nodeSays(rank: number, s: AgentSnapshot): AgentSnapshot | undefined {
  if (rank === 0) return s;
  if (isLost(s)) return { lifecycle: s.lifecycle, preempted: s.preempted };
  if (isFailed(s)) return { lifecycle: s.lifecycle, preempted: false, phase: s.phase, exitCode: s.exitCode ?? 70 };
  if (s.preempted) return { lifecycle: s.lifecycle, preempted: true };
  return undefined;
}

/**
 * The gang as one snapshot, from every node's (rank order): rank 0's, with the worst
 * word of the others over it. A lost node makes the gang lost (rank 0's checkpoints still
 * count), a failed node makes it failed, a noticed preemption makes it drain.
 */
export function gangSnapshot(snapshots: readonly AgentSnapshot[]): AgentSnapshot {
  const [lead, ...others] = snapshots;
  // Rank 0 finished the work: what happens to the others now changes nothing.
  if (lead.phase === 'exited' && lead.exitCode === 0 && !lead.preempted) return lead;
  const said = others.map((s, i) => nodeSays(i + 1, s)).filter((s): s is AgentSnapshot => s !== undefined);
  const lost = said.find(isLost);
  if (lost) return { ...lead, lifecycle: lost.lifecycle, preempted: lead.preempted || lost.preempted };
  const failed = said.find(isFailed);
  if (failed) return { ...lead, phase: failed.phase, exitCode: failed.exitCode, preempted: false };
  if (said.some((s) => s.preempted) && lead.phase !== 'exited') return { ...lead, preempted: true };
  return lead;
}

/**
 * A node's observation (the fleet observer's, one per VM) as the gang's, named as the
 * attempt, or undefined when it says nothing of the gang or is no node of `live`.
 * Single-node attempts, and the run's own look at the whole gang, pass through as they are.
 */
export function gangObservation(live: ResourceRef, observation: ResourceObservation): ResourceObservation | undefined {
  // The run's own look sees the gang whole (the provider's gangSnapshot), under its name.
  if (gangSize(live) === 1 || observation.name === live.name) return observation;
  const rank = rankIn(live, observation.name);
  if (rank === undefined) return undefined;
  const snapshot = nodeSays(rank, observation.snapshot);
  return snapshot && { ...observation, name: live.name, snapshot };
}

/**
 * The gang's release, from its nodes' (rank order): deleted if any node was, not ours if
 * any was (and none deleted), absent only if every node was. Its window starts with the
 * first node and lasts the nodes' mean running time, so that the gang's price (every
 * node's) over it is what the nodes were billed, even for a partial gang whose only
 * created node ran a few seconds.
 */
export function gangRelease(results: readonly ReleaseResult[]): ReleaseResult {
  const outcome = results.some((r) => r.outcome === 'deleted') ? 'deleted' : results.some((r) => r.outcome === 'not-ours') ? 'not-ours' : 'absent';
  // A node that landed late speaks for the gang's watch; else any node's passed deadline.
  const watch = results.find((r) => r.createWatch?.outcome === 'landed-late')?.createWatch ?? results.find((r) => r.createWatch)?.createWatch;
  const watched = watch ? { createWatch: watch } : {};
  const first = gangStartedAt(results.map((r) => r.startedAt));
  if (!first) {
    const stops = results.map((r) => r.stoppedAt).filter((t): t is string => t !== undefined);
    return { outcome, ...(stops.length ? { stoppedAt: stops.reduce((a, b) => (Date.parse(a) >= Date.parse(b) ? a : b)) } : {}), ...watched };
  }
  // A node found gone says only when it stopped: it ran from the gang's start, as far as anyone knows.
  const ran = results.map((r) => (r.stoppedAt ? Math.max(0, Date.parse(r.stoppedAt) - Date.parse(r.startedAt ?? first)) : 0));
  const meanMs = ran.reduce((a, b) => a + b, 0) / results.length;
  return { outcome, startedAt: first, stoppedAt: new Date(Date.parse(first) + Math.round(meanMs)).toISOString(), ...watched };
}

/** The earliest of the nodes' start times: the gang is billed from its first node. */
export function gangStartedAt(starts: readonly (string | undefined)[]): string | undefined {
  const known = starts.filter((t): t is string => t !== undefined);
  return known.length ? known.reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b)) : undefined;
}

/** The nodes of an attempt, as the status shows them. */
export function gangNodesView(ref: ResourceRef): { rank: number; name: string }[] {
  return nodeRefs(ref).map((r, rank) => ({ rank, name: r.name }));
}
