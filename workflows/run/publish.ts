/**
 * What a run shows outside its history: search attributes (the web UI's columns and
 * filters), the UI's current details, and the cost memo `sterna cost` reads. Each is
 * written only when what it shows has changed.
 */
import { setCurrentDetails, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { RunSpec } from '../spec';
import { costMemoOf, COST_MEMO } from './cost-refresh';
import type { RunState } from './state';
import { currentDetailsOf, releasingOf, RELEASING_MEMO, searchAttributesOf } from './views';

export class Publisher {
  private attributes = '';
  private memo = '';
  /** Nothing is released beside until a run has an attempt, so an empty list is never written. */
  private releasing = '[]';

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
  ) {}

  /**
   * The search attributes, when changed, the UI's current details, and the attempts still
   * being released (for the reaper: written in the same workflow task as the attempt that
   * supersedes them, so it never sees the newer attempt without them).
   */
  attributesAndDetails(): void {
    setCurrentDetails(currentDetailsOf(this.state, this.spec, Date.now()));
    const releasing = releasingOf(this.state);
    const releasingKey = JSON.stringify(releasing);
    if (releasingKey !== this.releasing) {
      this.releasing = releasingKey;
      upsertMemo({ [RELEASING_MEMO]: releasing });
    }
    const attributes = searchAttributesOf(this.state, this.spec, Date.now());
    const key = JSON.stringify(attributes);
    if (key === this.attributes) return;
    this.attributes = key;
    upsertSearchAttributes(attributes);
  }

  /** The run's cost summary, for `sterna cost` (a memo: listed with the run, no worker needed). */
  costMemo(): void {
    const memo = costMemoOf(this.state, this.spec, Date.now());
    const key = JSON.stringify(memo);
    if (key === this.memo) return;
    this.memo = key;
    upsertMemo({ [COST_MEMO]: memo });
  }
}
