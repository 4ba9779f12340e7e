/**
 * GPU utilisation while a run trains: the readings the agent publishes (nvidia-smi on the
 * VM), their time-weighted average, and the idle rule of `monitoring.minGpuUtilisation`:
 * GPUs that stay below it for `monitoring.idleWindow` stop the run (GpuIdle) or flag it,
 * as the spec says — dstack's utilisation policy. Pure: the machine feeds it what the run
 * heard and asks it at each decision.
 *
 * A reading holds until the next one (the agent publishes only changes), so "stayed
 * below for the window" is measured from the first reading below the threshold; any
 * reading at or above it starts the window over. Only training counts: staging a dataset
 * or restoring a checkpoint leaves GPUs idle by nature, and a new attempt starts afresh.
 */
import { FailureType } from '../failures';
import { IdleAction, type RunSpec } from '../spec';
import type { GpuReading } from '../types';
import { currentAttempt, type GpuState, type RunState } from './state';

export type IdleVerdict = { kind: 'stop'; failure: FailureType; message: string } | { kind: 'flag'; message: string };

/** Folds one reading of the live attempt's GPUs, heard at `nowMs`, into the state. */
export function absorbGpu(state: RunState, monitoring: RunSpec['monitoring'], attempt: number, reading: GpuReading, nowMs: number): void {
  const last = state.gpu;
  const sameAttempt = last?.attempt === attempt;
  const held = sameAttempt ? Math.max(0, (nowMs - last.atMs) / 1000) : 0;
  const below = monitoring.minGpuUtilisation !== undefined && reading.utilisation < monitoring.minGpuUtilisation;
  const next: GpuState = {
    ...reading,
    attempt,
    atMs: nowMs,
    // The average runs over the whole run, every attempt's training included.
    weightedPercentSeconds: (last?.weightedPercentSeconds ?? 0) + (sameAttempt ? last.utilisation * held : 0),
    sampledSeconds: (last?.sampledSeconds ?? 0) + held,
    belowSinceMs: below ? (sameAttempt && last.belowSinceMs !== undefined ? last.belowSinceMs : nowMs) : undefined,
    idle: below && sameAttempt ? last.idle : undefined,
  };
  state.gpu = next;
}

/** The run's average utilisation so far (percent), or undefined before any reading. */
export function meanUtilisation(gpu: GpuState | undefined): number | undefined {
  if (!gpu) return undefined;
  return gpu.sampledSeconds > 0 ? gpu.weightedPercentSeconds / gpu.sampledSeconds : gpu.utilisation;
}

/** When the idle rule fires if nothing changes (epoch ms): the machine waits no longer than that. */
export function idleCheckAtMs(state: RunState, spec: RunSpec): number | undefined {
  const since = state.gpu?.belowSinceMs;
  // A reading of an earlier attempt says nothing about the GPUs training now.
  if (state.gpu?.attempt !== currentAttempt(state)?.attempt) return undefined;
  if (since === undefined || spec.monitoring.minGpuUtilisation === undefined || state.gpu?.idle) return undefined;
  return since + spec.monitoring.idleWindow * 1000;
}

/** What the idle rule says now: stop, flag (once per idle spell), or nothing. */
export function idleVerdict(state: RunState, spec: RunSpec, nowMs: number): IdleVerdict | undefined {
  const at = idleCheckAtMs(state, spec);
  if (at === undefined || nowMs < at) return undefined;
  const gpu = state.gpu!;
  const { minGpuUtilisation, idleWindow, idleAction } = spec.monitoring;
  const words = `GPUs below ${minGpuUtilisation}% utilisation for ${Math.round((nowMs - gpu.belowSinceMs!) / 1000)} s (monitoring.idleWindow ${idleWindow} s; last reading ${gpu.utilisation}% on ${gpu.gpus} GPU${gpu.gpus === 1 ? '' : 's'})`;
  if (idleAction === IdleAction.Flag) return { kind: 'flag', message: `${words}; flagged, the run goes on (monitoring.idleAction "flag")` };
  const kept = state.lastCheckpoint ? `; last checkpoint ${state.lastCheckpoint.uri} (step ${state.lastCheckpoint.step}) is kept` : '';
  return { kind: 'stop', failure: FailureType.GpuIdle, message: `${words}; stopped (monitoring.idleAction "stop")${kept}` };
}
