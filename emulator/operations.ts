/**
 * Zone operations, as GCE runs them: PENDING -> RUNNING -> DONE, with failures reported
 * in the DONE operation's `error.errors[]` (code, message, errorDetails) plus
 * `httpErrorStatusCode`/`httpErrorMessage`. `wait` returns as soon as the operation is
 * DONE, or after a bounded time with the operation as it stands (GCE: about 2 minutes),
 * so callers loop on it.
 */
import { compileFilter } from './filter';
import { API_BASE, newId, newOperationName } from './ids';
import { OperationStatus, type EmulatorState, type OperationErrorItem, type OperationRecord, type OperationType } from './types';

/** Completed operations kept per emulator by default, oldest dropped first (GCE keeps them for a while, too). */
export const DEFAULT_OPERATIONS_KEPT = 5_000;

export const HTTP_ERROR_MESSAGES: Record<number, string> = { 400: 'BAD REQUEST', 403: 'FORBIDDEN', 404: 'NOT FOUND', 409: 'CONFLICT', 412: 'PRECONDITION FAILED', 503: 'SERVICE UNAVAILABLE' };

export class Operations {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly state: EmulatorState,
    private readonly persist: () => void,
    private readonly kept = DEFAULT_OPERATIONS_KEPT,
  ) {}

  create(input: { project: string; zone: string; type: OperationType; targetLink: string; targetId: string; status?: OperationStatus; user?: string; nowMs: number }): OperationRecord {
    const op: OperationRecord = {
      id: newId(),
      name: newOperationName(input.nowMs),
      project: input.project,
      zone: input.zone,
      operationType: input.type,
      targetLink: input.targetLink,
      targetId: input.targetId,
      status: input.status ?? OperationStatus.Running,
      progress: 0,
      insertMs: input.nowMs,
      startMs: input.status === OperationStatus.Pending ? undefined : input.nowMs,
      user: input.user ?? 'sterna-emulator@local',
    };
    this.state.operations.push(op);
    if (this.state.operations.length > this.kept) {
      const drop = this.state.operations.findIndex((o) => o.status === OperationStatus.Done);
      if (drop >= 0) this.state.operations.splice(drop, 1);
    }
    this.persist();
    return op;
  }

  find(project: string, zone: string, name: string): OperationRecord | undefined {
    return this.state.operations.find((o) => o.name === name && o.project === project && o.zone === zone);
  }

  byName(name: string): OperationRecord | undefined {
    return this.state.operations.find((o) => o.name === name);
  }

  finish(op: OperationRecord, nowMs: number, failure?: { errors: OperationErrorItem[]; httpStatus: number }): void {
    if (op.status === OperationStatus.Done) return;
    op.status = OperationStatus.Done;
    op.progress = 100;
    op.startMs ??= nowMs;
    op.endMs = nowMs;
    op.failAtMs = undefined;
    if (failure) {
      op.error = failure.errors;
      op.httpErrorStatusCode = failure.httpStatus;
      op.httpErrorMessage = HTTP_ERROR_MESSAGES[failure.httpStatus] ?? 'ERROR';
    }
    this.persist();
    this.notify(op);
  }

  /** Resolves when the operation is DONE or after `maxMs`, whichever comes first. */
  wait(op: OperationRecord, maxMs: number): Promise<OperationRecord> {
    if (op.status === OperationStatus.Done) return Promise.resolve(op);
    return new Promise((resolve) => {
      const set = this.waiters.get(op.name) ?? new Set<() => void>();
      this.waiters.set(op.name, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.waiters.delete(op.name);
        resolve(op);
      };
      const timer = setTimeout(done, maxMs);
      timer.unref();
      set.add(done);
    });
  }

  /** Releases every pending `wait` (on shutdown). */
  releaseWaiters(): void {
    for (const set of [...this.waiters.values()]) for (const done of [...set]) done();
  }

  list(project: string, zone: string, filter?: string): OperationRecord[] {
    const matches = compileFilter(filter);
    return this.state.operations.filter((o) => o.project === project && o.zone === zone && matches(renderOperation(o)));
  }

  private notify(op: OperationRecord): void {
    for (const done of [...(this.waiters.get(op.name) ?? [])]) done();
  }
}

export function operationSelfLink(op: OperationRecord): string {
  return `${API_BASE}projects/${op.project}/zones/${op.zone}/operations/${op.name}`;
}

export function renderOperation(op: OperationRecord): Record<string, unknown> {
  const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());
  return {
    kind: 'compute#operation',
    id: op.id,
    name: op.name,
    zone: `${API_BASE}projects/${op.project}/zones/${op.zone}`,
    operationType: op.operationType,
    targetLink: op.targetLink,
    targetId: op.targetId,
    status: op.status,
    statusMessage: op.statusMessage,
    user: op.user,
    progress: op.progress,
    insertTime: iso(op.insertMs),
    startTime: iso(op.startMs),
    endTime: iso(op.endMs),
    selfLink: operationSelfLink(op),
    ...(op.error ? { error: { errors: op.error }, httpErrorStatusCode: op.httpErrorStatusCode, httpErrorMessage: op.httpErrorMessage } : {}),
  };
}
