/** The trainingRun workflow's messages, named for their kind. */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { RunResult, RunStatus } from './run/views';
import type { RunSpecInput } from './spec';
import type { ResourceObservation } from './types';

/**
 * The trainingRun workflow as a client starts it: a spec in, the result out (its
 * continue-as-new input is the workflow's own). A plain type, so the client package carries
 * no workflow code; test/stack/client.test.ts checks it against the workflow.
 */
export type TrainingRunWorkflow = (spec: RunSpecInput) => Promise<RunResult>;

export const statusQuery = defineQuery<RunStatus>('status');

/**
 * Raise or lower the budget (USD). Rejected below what the run has already spent. `by`:
 * who asks, as the caller's Temporal client identity says (what the server records with
 * the update); the run keeps it, and its status says who set each limit.
 */
export const setBudgetUpdate = defineUpdate<RunStatus, [budgetUsd: number, by?: string]>('setBudget');

/** Move the deadline (ISO 8601). Rejected if it is not in the future. `by` as for the budget. */
export const setDeadlineUpdate = defineUpdate<RunStatus, [deadline: string, by?: string]>('setDeadline');

/**
 * An external preemption notice (a GCE shutdown hook, a watcher on the preempted
 * operations, a GKE node-termination handler), so the run reacts without waiting for
 * its next poll. `name` is the resource it concerns; a notice for another attempt is ignored.
 */
export const preemptionNoticeSignal = defineSignal<[notice: { name: string; reason?: string }]>('preemptionNotice');

export type { ResourceObservation };
export const observationSignal = defineSignal<[observation: ResourceObservation]>('observation');
