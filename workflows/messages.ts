/** The trainingRun workflow's messages, named for their kind. */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { RunStatus } from './run-state';

export const statusQuery = defineQuery<RunStatus>('status');

/** Raise or lower the budget (USD). Rejected below what the run has already spent. */
export const setBudgetUpdate = defineUpdate<RunStatus, [budgetUsd: number]>('setBudget');

/** Move the deadline (ISO 8601). Rejected if it is not in the future. */
export const setDeadlineUpdate = defineUpdate<RunStatus, [deadline: string]>('setDeadline');

/**
 * An external preemption notice (a GCE shutdown hook, a watcher on the preempted
 * operations, a GKE node-termination handler), so the run reacts without waiting for
 * its next poll. `name` is the resource it concerns; a notice for another attempt is ignored.
 */
export const preemptionNoticeSignal = defineSignal<[notice: { name: string; reason?: string }]>('preemptionNotice');
