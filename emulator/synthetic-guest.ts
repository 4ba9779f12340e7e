/**
 * Synthetic guests, for scale work only: a VM runs no process; the emulator plays what
 * the Sterna agent (activities/agent/sterna-agent.sh) and a checkpointing trainer
 * would let the outside world see, as guest attributes `sterna/*`:
 *
 *   phase starting -> staging (total-bytes, staged-bytes) -> training (step, and every
 *   `checkpointEvery` steps a checkpoint "<step> <sha256> <uri>") -> at `steps`: final
 *   checkpoint, exit <exitCode>, phase exited. The VM stays RUNNING, as with the agent.
 *
 *   Resume: `sterna-resume-from` metadata ("<sha256> <uri>") sets the first step from the
 *   uri's `step-<N>` file name; a checkpoint that is missing or whose sha256 differs
 *   fails the guest as the agent does (phase failed, exit 67).
 *
 *   SIGTERM (preemption notice, delete, time limit): during training the trainer
 *   finishes its step, checkpoints it, and the agent publishes it, exit 143 and phase
 *   exited; the guest is then gone, so the VM stops before its notice ends. Before
 *   training the agent has no handler yet and dies at once (exit 143, nothing
 *   published). If the step would end after SIGKILL, nothing more is published.
 *
 * Progress is a pure function of emulated time since the VM started (guestState), so
 * thousands of guests cost one timer: a tick re-evaluates them and publishes what
 * changed. Checkpoint files are written under `bucketsDir` when the uri maps there
 * (gs://b/p -> <bucketsDir>/b/p, or a file:// uri inside it); otherwise no file is
 * written and the sha256 is that of the content the file would have (still stable).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import type { Clock } from './clock';
import type { InstanceRecord } from './types';

export interface SyntheticGuestConfig {
  /** Steps of a whole run; the guest exits when it reaches this step. */
  steps: number;
  /** Emulated seconds per training step. */
  stepSeconds: number;
  /** A checkpoint every this many steps (and one at the end). */
  checkpointEvery: number;
  /** Emulated seconds in phase starting, then in staging. */
  startingSeconds: number;
  stagingSeconds: number;
  /** What total-bytes reports while staging. */
  datasetBytes: number;
  /** Emulated seconds the agent spends uploading the final checkpoint once the trainer has exited. */
  uploadSeconds: number;
  /** The trainer's exit status when it reaches `steps` (0: success, with a final checkpoint). */
  exitCode: number;
}

export const DEFAULT_SYNTHETIC_GUEST: SyntheticGuestConfig = {
  steps: 1000,
  stepSeconds: 1,
  checkpointEvery: 100,
  startingSeconds: 1,
  stagingSeconds: 5,
  datasetBytes: 1_000_000_000,
  uploadSeconds: 1,
  exitCode: 0,
};

/** What the agent does when a resumed checkpoint is missing or does not match its sha256. */
export const RESUME_FAILED_EXIT = 67;
/** 128 + SIGTERM: the trainer's (and an unprotected agent's) status after the notice. */
export const SIGTERM_EXIT = 143;

/** Per-VM state, kept in the instance record so an emulator restart resumes the guest. */
export interface SyntheticGuestRecord {
  config: SyntheticGuestConfig;
  /** Epoch ms at which the guest started (the VM's RUNNING time). */
  startedAtMs: number;
  /** The step training starts from (from `sterna-resume-from`), 0 without. */
  resumeStep: number;
  /** Why the resume checkpoint was refused; the guest then fails after staging. */
  resumeError?: string;
  /** The checkpoint uri prefix (`sterna-checkpoint-uri`, no trailing slash). */
  checkpointUri?: string;
  /** When SIGTERM arrived (epoch ms). */
  termAtMs?: number;
  /** Set once the guest is gone: exited on its own, after SIGTERM, or killed. */
  exitedAtMs?: number;
  exitCode?: number;
  killed?: boolean;
  /** The newest checkpoint step published (files are written once). */
  checkpointStep?: number;
}

/** What the guest has published at a moment (attributes absent are not published yet). */
export interface GuestView {
  phase: 'starting' | 'staging' | 'training' | 'uploading' | 'exited' | 'failed';
  totalBytes?: number;
  stagedBytes?: number;
  step?: number;
  checkpointStep?: number;
  /** The exit status, once the guest is gone (undefined while it runs). */
  exitCode?: number;
  /** When the guest ends, in emulated seconds since it started; undefined while it has not. */
  endsAt?: number;
  /** False when the agent died without publishing (SIGTERM before training). */
  published: boolean;
}

function floorStep(seconds: number, stepSeconds: number): number {
  // Guard against 2.9999999 steps from float arithmetic on exact boundaries.
  return Math.floor(seconds / stepSeconds + 1e-9);
}

/**
 * The guest at `elapsed` emulated seconds after it started; `termAt` is when SIGTERM
 * arrived (emulated seconds after start), if it did.
 */
export function guestState(rec: Pick<SyntheticGuestRecord, 'config' | 'resumeStep' | 'resumeError'>, elapsed: number, termAt?: number): GuestView {
  const c = rec.config;
  const stagingAt = c.startingSeconds;
  const trainingAt = c.startingSeconds + c.stagingSeconds;
  const termed = termAt !== undefined && termAt <= elapsed;
  if (termed && termAt < trainingAt) return { phase: elapsed < stagingAt ? 'starting' : 'staging', exitCode: SIGTERM_EXIT, endsAt: termAt, published: false };
  if (elapsed < stagingAt) return { phase: 'starting', published: true };
  if (elapsed < trainingAt) {
    const staged = Math.floor((c.datasetBytes * (elapsed - stagingAt)) / Math.max(c.stagingSeconds, 1e-9));
    return { phase: 'staging', totalBytes: c.datasetBytes, stagedBytes: Math.min(staged, c.datasetBytes), published: true };
  }
  const staged = { totalBytes: c.datasetBytes, stagedBytes: c.datasetBytes };
  if (rec.resumeError !== undefined) return { phase: 'failed', ...staged, exitCode: RESUME_FAILED_EXIT, endsAt: trainingAt, published: true };

  const stepAt = (t: number) => Math.min(c.steps, rec.resumeStep + floorStep(t - trainingAt, c.stepSeconds));
  const newestCheckpoint = (step: number) => {
    const k = Math.floor(step / c.checkpointEvery) * c.checkpointEvery;
    return k > rec.resumeStep ? k : undefined;
  };
  const finishAt = trainingAt + Math.max(0, c.steps - rec.resumeStep) * c.stepSeconds;

  // When the trainer ends, at which step, with what status and final checkpoint.
  let trainerEnd = finishAt;
  let finalStep = c.steps;
  let exitCode = c.exitCode;
  let finalCheckpoint = c.exitCode === 0 ? c.steps : newestCheckpoint(c.steps);
  if (termAt !== undefined && termAt < finishAt) {
    // SIGTERM: the trainer finishes the step in progress, checkpoints it and exits 143.
    finalStep = Math.min(c.steps, stepAt(termAt) + 1);
    trainerEnd = trainingAt + (finalStep - rec.resumeStep) * c.stepSeconds;
    exitCode = SIGTERM_EXIT;
    finalCheckpoint = finalStep;
  }
  if (elapsed < trainerEnd) {
    const step = stepAt(elapsed);
    return { phase: 'training', ...staged, step, checkpointStep: newestCheckpoint(step), published: true };
  }
  const endsAt = trainerEnd + c.uploadSeconds;
  if (elapsed < endsAt) return { phase: 'uploading', ...staged, step: finalStep, checkpointStep: newestCheckpoint(finalStep), published: true };
  return { phase: 'exited', ...staged, step: finalStep, checkpointStep: finalCheckpoint, exitCode, endsAt, published: true };
}

/** The bytes a synthetic checkpoint holds: a function of its uri alone, so its sha256 is stable. */
export function checkpointContent(uri: string, step: number): string {
  return `${JSON.stringify({ sterna: 'synthetic checkpoint', step, uri })}\n`;
}

export function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The local file a uri names under `bucketsDir`, or undefined when it names none there. */
export function localPathOf(uri: string, bucketsDir: string | undefined): string | undefined {
  if (!bucketsDir) return undefined;
  const root = resolve(bucketsDir);
  let path: string;
  if (uri.startsWith('gs://')) path = resolve(root, uri.slice('gs://'.length));
  else if (uri.startsWith('file://')) path = resolve(uri.slice('file://'.length));
  else return undefined;
  return path.startsWith(`${root}${sep}`) ? path : undefined;
}

/** Parses `sterna-resume-from` ("<sha256> <uri>") and checks the checkpoint as the agent would. */
export function resumePoint(value: string | undefined, bucketsDir: string | undefined): { resumeStep: number; resumeError?: string } {
  if (!value) return { resumeStep: 0 };
  const match = /^([0-9a-f]{64}) (.+)$/.exec(value.trim());
  const step = match ? /(?:^|\/)step-(\d+)(?:\.[^/]*)?$/.exec(match[2]) : null;
  if (!match || !step) return { resumeStep: 0, resumeError: `sterna-resume-from '${value.slice(0, 200)}' is not "<sha256> <uri of step-<N>>"` };
  const [, want, uri] = match;
  const resumeStep = Number(step[1]);
  const path = localPathOf(uri, bucketsDir);
  const actual = path === undefined ? sha256(checkpointContent(uri, resumeStep)) : existsSync(path) ? sha256(readFileSync(path)) : undefined;
  if (actual !== want) return { resumeStep, resumeError: `checkpoint ${uri} is missing or does not match its sha256` };
  return { resumeStep };
}

export interface SyntheticGuestsOptions {
  clock: Clock;
  /** Real milliseconds between ticks (default 200). */
  tickMs?: number;
  bucketsDir?: string;
  /** The guest published something (guest attributes changed). */
  changed(i: InstanceRecord): void;
  /** The guest is gone (exited, or died on SIGTERM). */
  exited(i: InstanceRecord): void;
  log(line: string): void;
}

/** Every synthetic guest of the emulator, advanced by one shared tick. */
export class SyntheticGuests {
  private readonly active = new Set<InstanceRecord>();
  private timer?: NodeJS.Timeout;
  private closed = false;
  private config: SyntheticGuestConfig;

  constructor(
    private readonly o: SyntheticGuestsOptions,
    config: SyntheticGuestConfig = DEFAULT_SYNTHETIC_GUEST,
  ) {
    this.config = { ...config };
  }

  /** The configuration new guests start with. */
  get defaults(): SyntheticGuestConfig {
    return { ...this.config };
  }

  configure(change: Partial<SyntheticGuestConfig>): SyntheticGuestConfig {
    this.config = checkedConfig({ ...this.config, ...change });
    return this.defaults;
  }

  get count(): number {
    return this.active.size;
  }

  /** The VM reached RUNNING: its guest starts now. */
  start(i: InstanceRecord, nowMs: number): void {
    const checkpointUri = i.metadata['sterna-checkpoint-uri']?.replace(/\/+$/, '') || undefined;
    i.vm.synthetic = { config: { ...this.config }, startedAtMs: nowMs, checkpointUri, ...resumePoint(i.metadata['sterna-resume-from'], this.o.bucketsDir) };
    this.adopt(i);
  }

  /** Takes a guest (again) after a restart; a guest already gone stays gone. */
  adopt(i: InstanceRecord): void {
    if (!i.vm.synthetic || i.vm.synthetic.exitedAtMs !== undefined) return;
    this.active.add(i);
    this.advance(i, this.o.clock.now());
    this.arm();
  }

  alive(i: InstanceRecord): boolean {
    return this.active.has(i);
  }

  /** SIGTERM: the guest reacts on the next ticks (or dies at once before training). */
  terminate(i: InstanceRecord, nowMs: number): void {
    const rec = i.vm.synthetic;
    if (!rec || !this.active.has(i) || rec.termAtMs !== undefined) return;
    rec.termAtMs = nowMs;
    this.advance(i, nowMs);
  }

  /** SIGKILL: whatever the guest had not published by now is lost. True if it was still alive. */
  kill(i: InstanceRecord, nowMs: number): boolean {
    if (!this.active.has(i)) return false;
    // The tick is coarse: first let the guest finish what it did before this moment
    // (the caller is stopping the VM: it learns of an exit from the record, not the callback).
    this.advance(i, nowMs, false);
    if (!this.active.delete(i)) return false;
    const rec = i.vm.synthetic!;
    rec.exitedAtMs = nowMs;
    rec.killed = true;
    return true;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer || this.closed || this.active.size === 0) return;
    this.timer = setInterval(() => this.tick(), this.o.tickMs ?? 200);
    this.timer.unref();
  }

  private tick(): void {
    const now = this.o.clock.now();
    for (const i of [...this.active]) {
      try {
        this.advance(i, now);
      } catch (err) {
        this.o.log(`synthetic guest ${i.project}/${i.zone}/${i.name}: ${(err as Error).message}`);
      }
    }
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private advance(i: InstanceRecord, nowMs: number, notify = true): void {
    const rec = i.vm.synthetic!;
    const since = (ms: number) => this.o.clock.emulatedSeconds(ms - rec.startedAtMs);
    const view = guestState(rec, since(nowMs), rec.termAtMs === undefined ? undefined : since(rec.termAtMs));
    if (view.published) this.publish(i, rec, view);
    if (view.exitCode !== undefined) {
      this.active.delete(i);
      rec.exitCode = view.exitCode;
      rec.exitedAtMs = rec.startedAtMs + this.o.clock.realMs(view.endsAt ?? since(nowMs));
      if (notify) this.o.exited(i);
    }
  }

  private publish(i: InstanceRecord, rec: SyntheticGuestRecord, view: GuestView): void {
    // Checkpoints are uploaded whether or not the agent can publish them.
    let checkpoint: string | undefined;
    if (view.checkpointStep !== undefined && view.checkpointStep !== rec.checkpointStep && rec.checkpointUri) {
      checkpoint = this.writeCheckpoint(rec.checkpointUri, view.checkpointStep);
      rec.checkpointStep = view.checkpointStep;
    }
    // As the agent's writes: nothing reaches guest attributes unless the VM enables them.
    if (!i.guestAttributesEnabled) return;
    const attrs = (i.guestAttributes.sterna ??= {});
    const before = JSON.stringify(attrs);
    const set = (key: string, value: number | string | undefined) => {
      if (value !== undefined) attrs[key] = String(value);
    };
    if (view.totalBytes !== undefined) set('total-bytes', view.totalBytes);
    if (view.stagedBytes !== undefined) set('staged-bytes', view.stagedBytes);
    if (view.step !== undefined) set('step', view.step);
    if (checkpoint !== undefined) attrs.checkpoint = checkpoint;
    if (view.exitCode !== undefined) set('exit', view.exitCode);
    // As the agent's preemption watcher: GCE's notice is relayed the moment it comes.
    if (i.preempted && rec.termAtMs !== undefined && view.phase !== 'exited') set('preempted', 'TRUE');
    set('phase', view.phase);
    if (JSON.stringify(attrs) !== before) this.o.changed(i);
  }

  /** Uploads (writes) a checkpoint and returns what the agent publishes: "<step> <sha256> <uri>". */
  private writeCheckpoint(prefix: string, step: number): string {
    const uri = `${prefix}/step-${step}.json`;
    const content = checkpointContent(uri, step);
    const path = localPathOf(uri, this.o.bucketsDir);
    if (path) {
      mkdirSync(dirname(path), { recursive: true });
      const temp = `${path}.tmp-${process.pid}`;
      writeFileSync(temp, content);
      renameSync(temp, path);
    }
    return `${step} ${sha256(content)} ${uri}`;
  }
}

export function checkedConfig(c: SyntheticGuestConfig): SyntheticGuestConfig {
  const problems: string[] = [];
  if (!Number.isInteger(c.steps) || c.steps < 1) problems.push(`steps must be a whole number >= 1 (got ${c.steps})`);
  if (!(c.stepSeconds > 0) || !Number.isFinite(c.stepSeconds)) problems.push(`stepSeconds must be > 0 (got ${c.stepSeconds})`);
  if (!Number.isInteger(c.checkpointEvery) || c.checkpointEvery < 1) problems.push(`checkpointEvery must be a whole number >= 1 (got ${c.checkpointEvery})`);
  if (![c.startingSeconds, c.stagingSeconds, c.uploadSeconds].every((x) => x >= 0 && Number.isFinite(x))) problems.push('startingSeconds, stagingSeconds and uploadSeconds must be >= 0');
  if (!Number.isInteger(c.datasetBytes) || c.datasetBytes < 0) problems.push(`datasetBytes must be a whole number >= 0 (got ${c.datasetBytes})`);
  if (!Number.isInteger(c.exitCode) || c.exitCode < 0 || c.exitCode > 255) problems.push(`exitCode must be 0-255 (got ${c.exitCode})`);
  if (problems.length) throw new Error(`synthetic guest: ${problems.join('; ')}`);
  return c;
}
