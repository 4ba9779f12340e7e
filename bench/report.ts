/** The human-readable table the benchmark prints. */
import type { BenchResult } from './run';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export function formatReport(r: BenchResult, seconds: number): string {
  const tickHours = r.gridSeconds / 3600;
  const lines = [
    `trace ${r.trace}, instances ${r.instanceGroup}${r.instanceGroups.length > 1 ? ` (of ${r.instanceGroups.join(', ')})` : ''}`,
    `zones ${r.zones.join(', ')}`,
    `view ${r.view}, memory ${r.memory} (the optimum sees everything)`,
    `grid ${r.gridSeconds} s; job ${r.jobHours} h, deadline ${r.deadlineHours} h, changeover ${r.changeoverHours} h -> ${r.changeoverTicks} tick(s) = ${(r.changeoverTicks * tickHours).toFixed(3)} h; ${r.windows.length} windows; ${seconds.toFixed(1)} s`,
    '',
    `${'policy'.padEnd(20)}${'mean cost/opt'.padStart(14)}${'p95 cost/opt'.padStart(14)}${'deadlines'.padStart(11)}${'savings vs OD'.padStart(15)}`,
  ];
  for (const [name, s] of Object.entries(r.summary)) {
    lines.push(`${name.padEnd(20)}${s.meanCostRatio.toFixed(3).padStart(14)}${s.p95CostRatio.toFixed(3).padStart(14)}${`${s.deadlinesMet}/${s.windows}`.padStart(11)}${pct(s.meanSavingsVsOnDemand).padStart(15)}`);
  }
  return lines.join('\n');
}
