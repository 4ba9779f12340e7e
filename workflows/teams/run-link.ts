/**
 * The run's link to its team workflow: asks for admission (an activity, since only a
 * client can signal-with-start), hears that there is an answer (a signal), reads the
 * answer from the team's ledger (a query, through an activity), and tells the team what
 * it spent and when it ended (signals from the workflow itself). Only runs that asked
 * their team ever send anything, so runs recorded before teams replay unchanged.
 *
 * The signal itself is never the answer: anyone who may signal the run could send one,
 * and a forged `admitted` would run it past its team's GPU quota while the ledger still
 * counted it as queued.
 */
import { getExternalWorkflowHandle, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Inbox } from '../inbox';
import type { RunEvent } from '../run/machine';
import type { RunState } from '../run/state';
import { ledger } from '../run/views';
import type { RunSpec } from '../spec';
import { admissionSignal, runEndedSignal, runSpendSignal, teamWorkflowId, type TeamActivities } from './contract';
import { admissionRequestOf, teamOf } from './run-admission';

/** How often a run with a billed attempt tells its team what it has spent so far. */
export const SPEND_REPORT_MS = 10 * 60_000;

export class TeamLink {
  private reportedAt: number | undefined;
  /** A ledger read in flight, and whether news came while it was (one more read then). */
  private reading = false;
  private newsWhileReading = false;
  private readonly acts = proxyActivities<TeamActivities>({
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
  });

  constructor(
    private readonly spec: RunSpec,
    private readonly state: RunState,
    private readonly inbox: Inbox,
  ) {}

  installHandlers(): void {
    // The signal is only news: the answer is the ledger's own (a signal can be forged).
    setHandler(admissionSignal, () => void this.readLedger());
  }

  /** Reads the ledger's answer for this run; the run acts on that alone. */
  private async readLedger(): Promise<void> {
    if (this.reading) {
      this.newsWhileReading = true;
      return;
    }
    const team = this.state.admission?.team;
    if (!team) return;
    this.reading = true;
    try {
      do {
        this.newsWhileReading = false;
        // A ledger that cannot be read now is read again at the run's next re-ask.
        const decision = await this.acts.admissionOf({ team, runId: this.state.runId }).catch(() => null);
        if (decision && decision.runId === this.state.runId) this.inbox.push({ kind: 'admission', decision });
      } while (this.newsWhileReading);
    } finally {
      this.reading = false;
    }
  }

  async ask(): Promise<RunEvent> {
    const asked = await this.acts.askAdmission({ team: teamOf(this.spec), request: admissionRequestOf(this.spec, this.state) });
    return asked ? { kind: 'admission-asked', teamWebhooks: asked.teamWebhooks } : { kind: 'admission-asked' };
  }

  /**
   * Tells the team the run's ledger total so far: at once when an attempt's line became
   * final (`lineFinal`), and every SPEND_REPORT_MS while an attempt is billed, so a team
   * sees long attempts' spend before they end.
   */
  billed(lineFinal: boolean): void {
    if (this.state.admission?.status !== 'admitted') return;
    const now = Date.now();
    const billing = this.state.attempts.some((a) => a.startedAt && !a.stoppedAt);
    if (!lineFinal && !(billing && now - (this.reportedAt ?? 0) >= SPEND_REPORT_MS)) return;
    this.reportedAt = now;
    void this.team()
      .signal(runSpendSignal, { runId: this.state.runId, totalUsd: ledger(this.state, Date.now()).totalCostUsd })
      .catch(() => undefined);
  }

  /** The run ended: its GPUs go back to the team, with its final ledger total. */
  async ended(): Promise<void> {
    if (!this.state.admission) return;
    // A team that is gone (terminated) has nothing to give back to.
    await this.team()
      .signal(runEndedSignal, { runId: this.state.runId, totalUsd: ledger(this.state, Date.now()).totalCostUsd })
      .catch(() => undefined);
  }

  private team() {
    return getExternalWorkflowHandle(teamWorkflowId(workflowInfo().taskQueue, this.state.admission!.team));
  }
}
