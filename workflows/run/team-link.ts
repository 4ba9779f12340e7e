/**
 * The run's link to its team workflow: asks for admission (an activity, since only a
 * client can signal-with-start), hears that there is an answer (a signal), reads the
 * answer from the team's ledger (a query, through an activity), and tells the team what
 * it spent and when it ended (the reportToTeam activity, when the reducer says:
 * run/effects.ts; a workflow cannot signal the ledger itself once teams have namespaces
 * of their own). Only runs that asked their team ever send anything.
 *
 * The signal itself is never the answer: anyone who may signal the run could send one,
 * and a forged `admitted` would run it past its team's GPU quota while the ledger still
 * counted it as queued.
 */
import { proxyActivities, setHandler } from '@temporalio/workflow';
import type { RunSpec } from '../spec';
import { admissionSignal, type TeamActivities } from '../teams/contract';
import { teamOf } from '../teams/rules';
import { admissionRequestOf } from './admission';
import type { Inbox } from './inbox';
import type { RunEvent } from './protocol';
import type { RunState } from './state';

export class TeamLink {
  /** A ledger read in flight, and whether news came while it was (one more read then). */
  private reading = false;
  private newsWhileReading = false;
  private readonly acts = proxyActivities<TeamActivities>({
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
  });
  /** Reports are a courtesy with an end: a run's end never waits long on a ledger it cannot reach (its sweep of closed runs catches up). */
  private readonly reports = proxyActivities<TeamActivities>({
    startToCloseTimeout: '30 seconds',
    scheduleToCloseTimeout: '5 minutes',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds', nonRetryableErrorTypes: ['InvalidSpec', 'NamespaceNotAllowed'] },
  });

  constructor(
    private readonly spec: RunSpec,
    private readonly state: () => RunState,
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
    // Only a run that asked has a ledger to read (its team may not be known yet: the
    // ledger's answer can come before the ask's own; the activity reads the team from the
    // run's namespace either way).
    const admission = this.state().admission;
    if (!admission) return;
    const team = admission.team;
    this.reading = true;
    try {
      do {
        this.newsWhileReading = false;
        const runId = this.state().runId;
        // A ledger that cannot be read now is read again at the run's next re-ask.
        const decision = await this.acts.admissionOf({ ...(team !== undefined ? { team } : {}), runId }).catch(() => null);
        if (decision && decision.runId === runId) this.inbox.push({ kind: 'admission', decision });
      } while (this.newsWhileReading);
    } finally {
      this.reading = false;
    }
  }

  async ask(): Promise<RunEvent> {
    // The spec's team label goes along only to be checked: the team is the run's namespace,
    // and a run that names another is refused (InvalidSpec) before anything is charged.
    const asked = await this.acts.askAdmission({ team: teamOf(this.spec), request: admissionRequestOf(this.spec, this.state()) });
    return asked ? { kind: 'admission-asked', teamWebhooks: asked.teamWebhooks, ...(asked.team !== undefined ? { team: asked.team } : {}) } : { kind: 'admission-asked' };
  }

  /** Tells the team the run's ledger total so far, without waiting. */
  reportSpend(team: string | undefined, totalUsd: number): void {
    void this.reports.reportToTeam({ ...(team !== undefined ? { team } : {}), totalUsd, ended: false }).catch(() => undefined);
  }

  /** The run ended: its GPUs go back to the team, with its final ledger total. */
  async ended(team: string | undefined, totalUsd: number): Promise<void> {
    // A ledger that cannot be told now releases the run's GPUs at its own sweep of closed runs.
    await this.reports.reportToTeam({ ...(team !== undefined ? { team } : {}), totalUsd, ended: true }).catch(() => undefined);
  }
}
