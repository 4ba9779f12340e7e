/**
 * A run's inbox: the messages that arrived (signals, update wake-ups), in order, waiting
 * to become the machine's next events. Waiting on it holds no activity slot.
 */
import { condition } from '@temporalio/workflow';
import type { RunEvent } from './protocol';

export class Inbox {
  private readonly events: RunEvent[] = [];

  push(event: RunEvent): void {
    this.events.push(event);
  }

  /** Whether messages wait to be taken. */
  pending(): boolean {
    return this.events.length > 0;
  }

  /** The next message, or a tick when `untilMs` (epoch ms) comes first. */
  async next(untilMs?: number): Promise<RunEvent> {
    if (this.events.length === 0) {
      if (untilMs === undefined) await condition(() => this.events.length > 0);
      else await condition(() => this.events.length > 0, Math.max(1, untilMs - Date.now()));
    }
    return this.events.shift() ?? { kind: 'tick' };
  }
}
