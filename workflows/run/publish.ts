/**
 * What a run shows outside its history: search attributes (the web UI's columns and
 * filters), the UI's current details, the attempts being released, and the cost memo
 * `sterna cost` reads. The reducer says what to show (run/effects.ts); this writes each
 * only when it changed.
 */
import { setCurrentDetails, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { CostMemo } from './cost-refresh';
import { COST_MEMO } from './cost-refresh';
import type { Effect } from './protocol';
import { RELEASING_MEMO } from './views';

export class Publisher {
  private attributes = '';
  private memo = '';
  /** Nothing is released beside until a run has an attempt, so an empty list is never written. */
  private releasing = '[]';

  /**
   * The search attributes and the attempts still being released (for the reaper: written
   * in the same workflow task as the attempt that supersedes them, so it never sees the
   * newer attempt without them), when changed, and the UI's current details.
   */
  show(shown: Extract<Effect, { kind: 'publish' }>): void {
    setCurrentDetails(shown.details);
    const releasingKey = JSON.stringify(shown.releasing);
    if (releasingKey !== this.releasing) {
      this.releasing = releasingKey;
      upsertMemo({ [RELEASING_MEMO]: shown.releasing });
    }
    const key = JSON.stringify(shown.attributes);
    if (key === this.attributes) return;
    this.attributes = key;
    upsertSearchAttributes(shown.attributes);
  }

  /** The run's cost summary, for `sterna cost` (a memo: listed with the run, no worker needed). */
  costMemo(memo: CostMemo): void {
    const key = JSON.stringify(memo);
    if (key === this.memo) return;
    this.memo = key;
    upsertMemo({ [COST_MEMO]: memo });
  }
}
