/**
 * How far a run is and when it will be done: step of total, percent, ETA and the cost it
 * is heading for. The total comes from the spec (`monitoring.totalSteps`) or from the
 * trainer's own report; the rate is measured over the live attempt's training, from its
 * first reported step, so time spent staging or recovering does not dilute it. Pure: the
 * status query, the workflow's current details and the CLI read the same numbers.
 */
import type { RunSpec } from '../spec';
import { currentAttempt, Phase, type Attempt, type RunState } from './state';

export interface Progress {
  step?: number;
  totalSteps?: number;
  /** 0-100, when the total is known. */
  percent?: number;
  /** Steps per second over the live attempt's training so far. */
  stepsPerSecond?: number;
  /** Seconds of training still to go at that rate. */
  etaSeconds?: number;
  /** The cost so far plus the ETA at the live attempt's price. */
  predictedCostUsd?: number;
}

/** Marks where the live attempt's rate is measured from: its first step heard while training. */
export function markProgress(state: RunState, attempt: number, step: number, nowMs: number): void {
  if (state.progressMark?.attempt === attempt) return;
  state.progressMark = { attempt, step, atMs: nowMs };
}

/**
 * The live attempt's training so far, for the throughput its spec is remembered by
 * (plan/measured.ts): steps from the mark to the newest step, over the seconds between
 * hearing them. Updated only when the step moves, so the time after the last step
 * (uploading, a preemption being noticed) is not counted as training.
 */
export function noteTraining(state: RunState, attempt: Attempt, step: number, nowMs: number): void {
  const mark = state.progressMark;
  if (mark?.attempt !== attempt.attempt || step <= mark.step + (attempt.training?.steps ?? 0)) return;
  attempt.training = { fromStep: mark.step, fromMs: mark.atMs, steps: step - mark.step, seconds: Math.max(0, nowMs - mark.atMs) / 1000 };
}

export function totalStepsOf(state: RunState, spec: RunSpec): number | undefined {
  return spec.monitoring.totalSteps ?? state.totalSteps;
}

export function progressOf(state: RunState, spec: RunSpec, costUsd: number, nowMs: number): Progress {
  const step = state.step;
  const totalSteps = totalStepsOf(state, spec);
  const out: Progress = { step, totalSteps };
  if (step === undefined || totalSteps === undefined) return out;
  out.percent = Math.min(100, (step / totalSteps) * 100);
  const live = currentAttempt(state);
  const mark = state.progressMark;
  if (!live || state.phase !== Phase.Training || mark?.attempt !== live.attempt) return out;
  // The step is as of the last word from the attempt; the time since counts as progress made.
  const heardAt = state.lastHeardAt ?? nowMs;
  const seconds = (heardAt - mark.atMs) / 1000;
  if (seconds <= 0 || step <= mark.step) return out;
  out.stepsPerSecond = (step - mark.step) / seconds;
  out.etaSeconds = Math.max(0, Math.max(0, totalSteps - step) / out.stepsPerSecond - Math.max(0, nowMs - heardAt) / 1000);
  out.predictedCostUsd = costUsd + (live.offer.pricePerHour * out.etaSeconds) / 3600;
  return out;
}

/** "1h 02m", "4m 05s", "12s": an ETA a person reads at a glance. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${s}s`;
}
