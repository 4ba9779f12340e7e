/** Human-readable lines for the CLI and the demo. */
import type { RunResult, RunStatus } from '../workflows/api';

export function usd(amount: number): string {
  return amount < 0.01 ? `$${amount.toFixed(5)}` : `$${amount.toFixed(2)}`;
}

/** How a provisioning model reads in the CLI. */
export function modelWord(model: string | undefined): string {
  return model === 'SPOT' ? 'spot' : model === 'FLEX_START' ? 'flex-start' : 'on-demand';
}

export function progressLine(s: RunStatus): string {
  const where = s.zone ? `${s.zone} ${modelWord(s.provisioningModel)}` : '-';
  const ckpt = s.lastCheckpoint ? ` ckpt ${s.lastCheckpoint.step}` : '';
  const waiting = s.waiting ? `  ${s.waiting}` : '';
  return `${s.phase.padEnd(16)} attempt ${s.attempt ?? '-'}  ${where.padEnd(26)} step ${String(s.step ?? 0).padStart(5)}${ckpt}  cost ${usd(s.costUsd)}  preemptions ${s.preemptions}${waiting}`;
}

/** A gang run's nodes, by rank (empty for a single node). */
export function nodesLines(s: RunStatus): string[] {
  return s.nodes ? [`  nodes: ${s.nodes.map((n) => `${n.rank} ${n.name}`).join(', ')}`] : [];
}

/** A failed attempt kept for inspection: until when, how to reach it, and its cost (empty when none is kept). */
export function keptLines(s: RunStatus): string[] {
  const k = s.kept;
  if (!k) return [];
  return [`  kept: attempt ${k.attempt} (${k.name} in ${k.zone}) until ${k.until}; the reaper deletes it then`, ...k.reach.map((line) => `    reach it: ${line}`), `    cost: ${k.cost}`];
}

/** The last line the current attempt printed (secrets replaced by *** on the VM). */
export function lastLineLines(s: RunStatus): string[] {
  return s.lastLine !== undefined ? [`  last line: ${s.lastLine}`] : [];
}

/**
 * Who did what to the run: who set its budget and deadline last, and who asked for its
 * cancellation (each the identity its client gave; empty for what only the spec set).
 */
export function changedByLines(s: RunStatus, cancelled?: { by: string; at: string }): string[] {
  const lines: string[] = [];
  const { budget, deadline } = s.limitsSetBy ?? {};
  if (budget && s.budgetUsd !== undefined) lines.push(`  budget ${usd(s.budgetUsd)}: set by ${budget.by} at ${budget.at}`);
  if (deadline && s.deadline !== undefined) lines.push(`  deadline ${s.deadline}: set by ${deadline.by} at ${deadline.at}`);
  if (cancelled) lines.push(`  cancellation requested by ${cancelled.by} at ${cancelled.at}`);
  return lines;
}

/** Where the run's prices come from, and what could not be priced (empty before the first offers). */
export function pricesLines(s: RunStatus): string[] {
  const p = s.prices;
  if (!p) return [];
  const lines = [`  prices: ${p.source === 'billing' ? 'Cloud Billing Catalog' : 'bundled catalog'} as of ${p.asOf}`];
  if (p.warning) lines.push(`  warning: ${p.warning}`);
  if (p.unpricedCount > 0) lines.push(`  unpriced zones (${p.unpricedCount}): ${p.unpriced.join(', ')}`);
  return lines;
}

export function summaryLines(r: RunResult): string[] {
  const lines = [`run ${r.runId}: ${r.status} at step ${r.finalStep ?? '?'}`];
  for (const a of r.attempts) {
    lines.push(`  attempt ${a.attempt}: ${a.zone.padEnd(18)} ${modelWord(a.provisioningModel).padEnd(10)} ${a.outcome.padEnd(15)} ${a.runningSeconds.toFixed(1).padStart(7)} s  ${usd(a.costUsd)}`);
  }
  const saved = r.onDemandCostUsd > 0 ? ` (${Math.round((1 - r.totalCostUsd / r.onDemandCostUsd) * 100)}% less)` : '';
  lines.push(`  preemptions ${r.preemptions}, restarts ${r.restarts}`);
  lines.push(`  cost ${usd(r.totalCostUsd)} against ${usd(r.onDemandCostUsd)} on demand${saved}`);
  return lines;
}
