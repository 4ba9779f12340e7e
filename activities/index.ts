/**
 * The trainingRun activities, built by a factory that takes its providers, so tests pass
 * emulator-backed clients and production passes real ones. Each activity is one step
 * the web UI shows; every long one heartbeats and resumes from its heartbeat details.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Context, CancelledFailure } from '@temporalio/activity';
import type { AgentSnapshot, ResourceRef } from '../workflows/types';
import type { MonitorInput, MonitorResult, StageResult, SternaActivities } from './contract';
import type { ComputeProvider } from './providers/provider';

export type { SternaActivities } from './contract';

/** Well inside the shortest heartbeat timeout the workflow sets (10 s). */
const HEARTBEAT_EVERY_MS = 3000;

export interface Providers {
  gce?: ComputeProvider;
  gke?: ComputeProvider;
}

/** Agent exit codes for its own failures (sterna-agent.sh), before the trainer ran. */
const AGENT_FAILURES: Record<number, string> = {
  64: 'no command given to the agent',
  65: 'a dataset path is not relative',
  66: 'staging a dataset failed',
  67: 'the checkpoint to resume from is missing or does not match its sha256',
  70: 'the agent could not create its work directory',
};

export function createActivities(providers: Providers): SternaActivities {
  const providerFor = (backend: string): ComputeProvider => {
    const provider = providers[backend as keyof Providers];
    if (!provider) throw new Error(`this worker has no ${backend} provider configured; see the README's "Workers" section`);
    return provider;
  };

  /**
   * Runs `body` with a heartbeat on a timer, not only on progress: a GCE operation can
   * take longer than the heartbeat timeout, and a silent wait would look like a dead
   * worker and cause a spurious retry. The heartbeat also delivers cancellation.
   */
  async function heartbeating<T>(body: (progress: (details: unknown) => void) => Promise<T>): Promise<T> {
    const context = Context.current();
    let last: unknown;
    const timer = setInterval(() => context.heartbeat(last), HEARTBEAT_EVERY_MS);
    try {
      return await body((details) => {
        last = details;
        context.heartbeat(details);
      });
    } finally {
      clearInterval(timer);
    }
  }

  /** Polls the resource until `done` says what to return, heartbeating each look. */
  async function follow<T>(ref: ResourceRef, pollSeconds: number, done: (s: AgentSnapshot) => T | undefined): Promise<T> {
    const provider = providerFor(ref.backend);
    return heartbeating(async (progress) => {
      for (;;) {
        const snapshot = await provider.observe(ref);
        progress(snapshot);
        const result = done(snapshot);
        if (result !== undefined) return result;
        await sleep(pollSeconds * 1000, undefined, { signal: Context.current().cancellationSignal }).catch(() => {
          throw new CancelledFailure('activity cancelled');
        });
      }
    });
  }

  return {
    async findCapacity({ backend, request }) {
      return providerFor(backend).findOffers(request);
    },

    async provision(request) {
      const provider = providerFor(request.offer.backend);
      const { cancellationSignal } = Context.current();
      try {
        return await heartbeating((progress) => provider.provision(request, (status) => progress({ status }), cancellationSignal));
      } catch (err) {
        // The provider has let its in-flight create settle; report the cancellation itself.
        if (cancellationSignal.aborted) throw new CancelledFailure('provision cancelled; no create of this call is still in flight');
        throw err;
      }
    },

    async stageData({ ref, pollSeconds }): Promise<StageResult> {
      return follow<StageResult>(ref, pollSeconds, (s) => {
        if (s.preempted || s.lifecycle === 'stopping' || s.lifecycle === 'terminated' || s.lifecycle === 'gone') return { kind: 'preempted' };
        if (s.phase === 'failed' || (s.phase === 'exited' && s.exitCode !== undefined && AGENT_FAILURES[s.exitCode])) {
          const exitCode = s.exitCode ?? 70;
          return { kind: 'failed', exitCode, reason: AGENT_FAILURES[exitCode] ?? `agent exit ${exitCode}` };
        }
        if (s.phase === 'training' || s.phase === 'uploading' || s.phase === 'exited') return { kind: 'staged', stagedBytes: s.stagedBytes ?? 0 };
        return undefined;
      });
    },

    async monitorTraining(input: MonitorInput): Promise<MonitorResult> {
      const returnAt = Date.now() + input.returnAfterSeconds * 1000;
      return follow<MonitorResult>(input.ref, input.pollSeconds, (s) => {
        const progress = { step: s.step, checkpoint: s.checkpoint };
        // The agent publishes its exit only after uploading the final checkpoint.
        if (s.phase === 'exited' && s.exitCode !== undefined && !s.preempted) return { kind: 'exited', exitCode: s.exitCode, ...progress };
        // A reclaimed VM is followed through its notice period until it is down, so
        // the final checkpoint the trainer writes on SIGTERM is not lost.
        if (s.lifecycle === 'terminated' || s.lifecycle === 'gone') return { kind: 'preempted', ...progress };
        if (s.preempted || s.lifecycle === 'stopping') return undefined;
        if (s.checkpoint && s.checkpoint.step > input.knownCheckpointStep) return { kind: 'progress', ...progress };
        if (Date.now() >= returnAt) return { kind: 'progress', ...progress };
        return undefined;
      });
    },

    async release(request) {
      return heartbeating((progress) => {
        progress({ releasing: request.ref.name });
        return providerFor(request.ref.backend).release(request, (status) => progress({ releasing: request.ref.name, status }));
      });
    },

    async observe({ ref }) {
      return providerFor(ref.backend).observe(ref);
    },
  };
}
