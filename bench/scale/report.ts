/** The scale benchmark's result for people (a table) and for machines (one JSON line). */
import { SLOT_WAIT_MS } from './analysis';
import type { ScaleResult } from './run';

const fmt = (x: number | undefined, digits = 1) => (x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits));

export function formatScaleReport(r: ScaleResult): string {
  const design = r.design === 'fleet-observer' ? `fleet observer (${r.observerWorkflows} observer workflow runs)` : `per-run looks every ${r.pollSeconds} s (no fleet observer)`;
  const methods = Object.entries(r.api.methods)
    .sort(([, a], [, b]) => b.calls - a.calls)
    .map(([m, u]) => `    ${m.padEnd(40)} ${String(u.calls).padStart(8)}${u.rateLimited ? `  (${u.rateLimited} x 403)` : ''}`);
  const waits = Object.entries(r.history.slotWaitActivities).map(([a, n]) => `${a} x${n}`).join(', ');
  const h = r.history;
  return [
    `scale benchmark: ${r.runs} runs, ${r.durationSeconds} s of training each, ${r.preemptionRate} preemptions per VM-hour, seed ${r.seed}`,
    `design measured: ${design}; worker tuning: ${r.workerTuning}; ${r.teamNamespaces > 0 ? `runs spread over ${r.teamNamespaces} team namespaces, the fleet in sterna-system` : 'one namespace for runs and fleet'}`,
    `machine: ${r.machine}; ${r.date}`,
    '',
    ...(r.workerExited ? [`  THE WORKER DIED during the measurement (${r.workerExited}); the figures below stop there`] : []),
    `  runs completed / failed / unfinished   ${r.completed} / ${r.failed} / ${r.unfinished}${Object.keys(r.failures).length ? `  (${JSON.stringify(r.failures)})` : ''}`,
    `  runs alive at once, peak               ${r.peakRunsAlive} (guests running, peak: ${r.peakGuestsRunning ?? 'n/a'}, worker RSS then ${fmt(r.workerRssAtPeakGuestsMb, 0)} MB)`,
    `  wall time, run-hours                   ${fmt(r.wallSeconds, 0)} s, ${fmt(r.runHours, 2)}`,
    `  worker peak RSS (median)               ${fmt(r.workerPeakRssMb)} MB (${fmt(r.workerMedianRssMb)} MB)`,
    ...(r.workerMemory
      ? [
          `  worker main-thread heap used/reserved  ${r.workerMemory.heapUsedMaxMb} / ${r.workerMemory.heapTotalMaxMb} MB (max); external ${r.workerMemory.externalMaxMb} MB`,
          `  workflow threads' heap used            ${r.workerMemory.threadsHeapUsedMaxMb} MB (max, summed over the threads)`,
          `  main thread's GC, seconds by kind      ${Object.entries(r.workerMemory.gcSeconds).map(([kind, s]) => `${kind} ${fmt(s)}`).join(', ') || 'n/a'}`,
          `  at its largest RSS sample              ${r.workerMemory.atPeakRss.rssMb} MB = main heap ${r.workerMemory.atPeakRss.heapTotalMb} + external ${r.workerMemory.atPeakRss.externalMb} + workflow threads' heaps ${r.workerMemory.atPeakRss.threadsHeapTotalMb} + the rest ${r.workerMemory.atPeakRss.otherMb} (SDK core, malloc, code)`,
        ]
      : []),
    `  worker CPU                             ${fmt(r.workerCpuSeconds)} s = ${fmt(r.workerCpuSecondsPerRunHour)} s per run-hour (${fmt(r.workerCores, 2)} cores)`,
    `  dev server / emulator CPU              ${fmt(r.temporalCpuSeconds)} s (${fmt(r.temporalCores, 2)} cores) / ${fmt(r.emulatorCpuSeconds)} s (${fmt(r.emulatorCores, 2)} cores); dev server peak RSS ${fmt(r.temporalPeakRssMb, 0)} MB`,
    `  cloud reads per run per minute         ${fmt(r.apiReadsPerRunMinute, 2)} (whole run), ${fmt(r.steadyReadsPerRunMinute, 2)} (steady, ${fmt(r.steadySeconds, 0)} s)`,
    `  cloud calls per run per minute         ${fmt(r.apiCallsPerRunMinute, 2)}`,
    `  403 rateLimitExceeded                  ${r.rateLimited}${r.rateLimited ? `  ${JSON.stringify(r.rateLimitedByMethod)}` : ''}`,
    `  direct looks per run per minute        ${fmt(r.looksPerRunMinute, 2)}`,
    `  history events per run-hour            ${fmt(r.historyEventsPerRunHour, 0)} (${fmt(r.historyEventsPerRun, 0)} per run, ${h.executions} executions for ${h.runsAnalysed} runs)`,
    `  runs that waited > ${SLOT_WAIT_MS / 1000} s for an activity  ${r.slotWaits}${waits ? `  (${waits})` : ''}`,
    `  activity schedule->start p50/p99/max   ${fmt(h.activityStartP50Ms, 0)} / ${fmt(h.activityStartP99Ms, 0)} / ${fmt(h.activityStartMaxMs, 0)} ms over ${h.activities} first tries (${h.activityRetries} retries)`,
    `  workflow task schedule->start p50/p99  ${fmt(h.workflowTaskStartP50Ms, 0)} / ${fmt(h.workflowTaskStartP99Ms, 0)} ms (max ${fmt(h.workflowTaskStartMaxMs, 0)}) over ${h.workflowTasks} tasks`,
    ...(r.steady
      ? [
          `  steady window only: slot waits, activity start p99, WFT start p50/p99   ${r.steady.slotWaits} runs, ${fmt(r.steady.activityStartP99Ms, 0)} ms, ${fmt(r.steady.workflowTaskStartP50Ms, 0)} / ${fmt(r.steady.workflowTaskStartP99Ms, 0)} ms`,
        ]
      : []),
    `  preemptions (unreplaced)               ${r.preemptions} (${r.preemptionsUnreplaced})`,
    `  preemption -> insert p50/p99/max       ${fmt(r.preemptionToInsertP50S, 2)} / ${fmt(r.preemptionToInsertP99S, 2)} / ${fmt(r.preemptionToInsertMaxS, 2)} s`,
    `  its steps, p50 / p99 s (${r.replacementPath.paths} preempted runs' histories):`,
    ...r.replacementPath.steps.map((s) => `    ${s.step.padEnd(38)} ${fmt(s.p50S, 2)} / ${fmt(s.p99S, 2)}`),
    ...(r.workerCpuProfile ?? []).flatMap((t) => [
      '',
      `  worker CPU profile ${t.file}: ${t.sampledSeconds} s on the CPU, self time by package:`,
      ...t.byPackage.slice(0, 12).map((p) => `    ${p.name.padEnd(40)} ${fmt(p.seconds, 1).padStart(8)} s  ${fmt(100 * p.share, 1).padStart(5)} %`),
      '  by function:',
      ...t.byFunction.slice(0, 15).map((f) => `    ${fmt(f.seconds, 1).padStart(8)} s  ${fmt(100 * f.share, 1).padStart(5)} %  ${f.name}`),
    ]),
    '',
    `  Compute API calls by method (${r.api.calls} in ${fmt(r.api.elapsedSeconds, 0)} s):`,
    ...methods,
  ].join('\n');
}

/** The last line of `--json`: the fixed keys first, then everything else. */
export function scaleJson(r: ScaleResult): string {
  const { runs, completed, workerPeakRssMb, apiReadsPerRunMinute, rateLimited, slotWaits, preemptions, preemptionToInsertP50S, preemptionToInsertP99S, ...rest } = r;
  return JSON.stringify({
    runs,
    completed,
    workerPeakRssMb,
    apiReadsPerRunMinute,
    rateLimited,
    slotWaits,
    preemptions,
    preemptionToInsertP50S: preemptionToInsertP50S ?? null,
    preemptionToInsertP99S: preemptionToInsertP99S ?? null,
    ...rest,
  });
}
