/**
 * The emulator's state on disk: one JSON file, replaced atomically (write a temporary
 * file, then rename), so a crash or restart never sees half a state. The server gathers
 * changes over a few milliseconds into one write, and writes at once when a VM process
 * starts (so a crash right after cannot orphan it). Plain JSON keeps it readable.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EmulatorState } from './types';

const STATE_FILE = 'state.json';

export class StateStore {
  readonly file: string;

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, STATE_FILE);
  }

  load(now: number): EmulatorState {
    if (!existsSync(this.file)) return emptyState(now);
    const parsed = JSON.parse(readFileSync(this.file, 'utf8')) as Partial<EmulatorState>;
    if (parsed.version !== 1) throw new Error(`${this.file}: unsupported emulator state version ${String(parsed.version)}`);
    return { ...emptyState(now), ...parsed } as EmulatorState;
  }

  save(state: EmulatorState): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(state));
    renameSync(tmp, this.file);
  }
}

export function emptyState(now: number): EmulatorState {
  return { version: 1, createdMs: now, epochMs: now, instances: [], operations: [], billing: [], capacity: {}, quotas: {}, spotDownZones: [] };
}
