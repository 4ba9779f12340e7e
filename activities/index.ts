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

  /** Polls the resource until `done` says what to return, heartbeating each look. */
  async function follow<T>(ref: ResourceRef, pollSeconds: number, done: (s: AgentSnapshot) => T | undefined): Promise<T> {
    const provider = providerFor(ref.backend);
    for (;;) {
      const snapshot = await provider.observe(ref);
      Context.current().heartbeat(snapshot);
      const result = done(snapshot);
      if (result !== undefined) return result;
      await sleep(pollSeconds * 1000, undefined, { signal: Context.current().cancellationSignal }).catch(() => {
        throw new CancelledFailure('activity cancelled');
      });
    }
  }

  return {
    async findCapacity({ backend, request }) {
      return providerFor(backend).findOffers(request);
    },

    async provision(request) {
      const provider = providerFor(request.offer.backend);
      return provider.provision(request, (status) => Context.current().heartbeat({ status }));
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

    async release({ ref }) {
      Context.current().heartbeat({ releasing: ref.name });
      return providerFor(ref.backend).release(ref);
    },

    async observe({ ref }) {
      return providerFor(ref.backend).observe(ref);
    },
  };
}
