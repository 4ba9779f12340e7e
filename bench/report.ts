/** The human-readable table the benchmark prints. */
import type { BenchResult, FlexSummary } from './run';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export function formatReport(r: BenchResult, seconds: number): string {
  const tickHours = r.gridSeconds / 3600;
  const lines = [
    `trace ${r.trace}, instances ${r.instanceGroup}${r.instanceGroups.length > 1 ? ` (of ${r.instanceGroups.join(', ')})` : ''}`,
    ...(r.nodes !== undefined ? [`gang of ${r.nodes} nodes: a zone has capacity at a tick only when availableNodes >= ${r.nodes} there; one node lost ends the attempt; costs are ${r.nodes} x the node's price`] : []),
    `zones ${r.zones.join(', ')}`,
    `view ${r.view}, memory ${r.memory} (the optimum sees everything)`,
    `grid ${r.gridSeconds} s; job ${r.jobHours} h, deadline ${r.deadlineHours} h, changeover ${r.changeoverHours} h -> ${r.changeoverTicks} tick(s) = ${(r.changeoverTicks * tickHours).toFixed(3)} h; ${r.windows.length} windows; ${seconds.toFixed(1)} s`,
    '',
    `${'policy'.padEnd(20)}${'mean cost/opt'.padStart(14)}${'p95 cost/opt'.padStart(14)}${'deadlines'.padStart(11)}${'savings vs OD'.padStart(15)}`,
  ];
  for (const [name, s] of Object.entries(r.summary)) {
    lines.push(`${name.padEnd(20)}${s.meanCostRatio.toFixed(3).padStart(14)}${s.p95CostRatio.toFixed(3).padStart(14)}${`${s.deadlinesMet}/${s.windows}`.padStart(11)}${pct(s.meanSavingsVsOnDemand).padStart(15)}`);
  }
  if (r.flex) lines.push('', ...formatFlex(r.flex));
  return lines.join('\n');
}

/** The flex-start tier's lines: ratios are to the optimum with the tier unless said. */
export function formatFlex(f: FlexSummary): string[] {
  return [
    `flex-start tier: price ${f.priceRatio.toFixed(3)} x on-demand (catalog), mean wait ${(f.options.meanWaitHours * 60).toFixed(0)} min (per zone within x2), window ${f.options.maxWaitHours} h; cost ratios above are to the optimum WITH the tier`,
    `optimum with / without the tier          ${f.optimumRatio.toFixed(3)}`,
    `sterna with the tier / optimum with it   ${f.sternaWithFlex.toFixed(3)}  (deadlines ${f.deadlinesWithFlex}/${f.windows}; ${f.flexRequests} requests, ${f.flexExpired} expired)`,
    `sterna without / optimum without         ${f.sternaWithoutFlex.toFixed(3)}  (deadlines ${f.deadlinesWithoutFlex}/${f.windows})`,
    `sterna without / optimum with the tier   ${f.sternaWithoutVsFlexOptimum.toFixed(3)}`,
    `sterna's saving from the tier            ${pct(f.sternaSavings)}`,
  ];
}
