/**
 * Live progress of a run for `sterna start --follow` and `sterna watch`: a progress bar
 * (cli-progress) with percent and ETA when the total work is known, phase, zone, cost so
 * far and the predicted total, redrawn in place on a terminal; one plain line per change
 * when the output is not a terminal; one JSON object per change with `--json`.
 *
 * The numbers are the run's own (its status query, workflows/run/progress.ts), so the
 * CLI, the web UI's current details and `sterna status --json` agree.
 */
import { Format, SingleBar, type Options, type Params } from 'cli-progress';
import { formatSeconds, type RunStatus } from '../workflows/api';
import { usd } from './format';

/** What one progress update says; the keys of `--json` output, exactly. */
export interface ProgressView {
  phase: string;
  zone: string | null;
  model: string | null;
  step: number | null;
  totalSteps: number | null;
  percent: number | null;
  etaSeconds: number | null;
  costUsd: number;
  predictedCostUsd: number | null;
  gpuUtilisation: number | null;
  preemptions: number;
}

export function progressView(s: RunStatus): ProgressView {
  const p = s.progress;
  const round = (n: number | undefined, digits: number) => (n === undefined ? null : Number(n.toFixed(digits)));
  return {
    phase: s.phase,
    zone: s.zone ?? null,
    model: s.provisioningModel ?? null,
    step: p?.step ?? s.step ?? null,
    totalSteps: p?.totalSteps ?? null,
    percent: round(p?.percent, 1),
    etaSeconds: round(p?.etaSeconds, 0),
    costUsd: Number(s.costUsd.toFixed(6)),
    predictedCostUsd: round(p?.predictedCostUsd, 6),
    gpuUtilisation: s.gpu?.utilisation ?? null,
    preemptions: s.preemptions,
  };
}

function where(v: ProgressView): string {
  return v.zone ? `${v.zone} ${v.model === 'SPOT' ? 'spot' : 'on-demand'}` : '-';
}

/** One plain line: what a log file or a pipe gets. */
export function plainLine(v: ProgressView): string {
  const step = v.step === null ? '-' : v.totalSteps === null ? `${v.step}` : `${v.step}/${v.totalSteps} (${v.percent!.toFixed(1)}%)`;
  const eta = v.etaSeconds === null ? '' : `  eta ${formatSeconds(v.etaSeconds)}`;
  const predicted = v.predictedCostUsd === null ? '' : `  predicted ${usd(v.predictedCostUsd)}`;
  const gpu = v.gpuUtilisation === null ? '' : `  gpu ${v.gpuUtilisation}%`;
  return `${v.phase}  ${where(v)}  step ${step}${eta}  cost ${usd(v.costUsd)}${predicted}${gpu}  preemptions ${v.preemptions}`;
}

/** The bar's line: the bar and percent only when the total is known. */
function barLine(options: Options, params: Params, payload: { view?: ProgressView }): string {
  const v = payload.view;
  if (!v) return '';
  const head = `${v.phase.padEnd(16)} ${where(v).padEnd(24)}`;
  const cost = `cost ${usd(v.costUsd)}${v.predictedCostUsd === null ? '' : ` -> ${usd(v.predictedCostUsd)}`}`;
  const gpu = v.gpuUtilisation === null ? '' : ` | gpu ${v.gpuUtilisation}%`;
  if (v.totalSteps === null || v.step === null) return `${head} step ${v.step ?? '-'} | ${cost}${gpu}`;
  const eta = v.etaSeconds === null ? '--' : formatSeconds(v.etaSeconds);
  return `${head} ${Format.BarFormat(params.progress, options)} ${v.percent!.toFixed(1).padStart(5)}% | ${v.step}/${v.totalSteps} | ETA ${eta} | ${cost}${gpu}`;
}

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** Shows each status as it comes; `stop()` leaves the last state on screen. */
export class ProgressDisplay {
  private bar?: SingleBar;
  private last = '';

  constructor(
    private readonly out: ProgressOutput & NodeJS.WritableStream,
    private readonly mode: 'tty' | 'plain' | 'json',
  ) {}

  static for(out: ProgressOutput & NodeJS.WritableStream, json: boolean): ProgressDisplay {
    return new ProgressDisplay(out, json ? 'json' : out.isTTY ? 'tty' : 'plain');
  }

  update(status: RunStatus): void {
    const view = progressView(status);
    if (this.mode === 'tty') return this.draw(view);
    const line = this.mode === 'json' ? JSON.stringify(view) : plainLine(view);
    // A line per change: the same status polled again says nothing new.
    if (line === this.last) return;
    this.last = line;
    this.out.write(`${line}\n`);
  }

  private draw(view: ProgressView): void {
    const total = view.totalSteps ?? 1;
    const value = view.totalSteps === null ? 0 : Math.min(view.step ?? 0, total);
    if (!this.bar) {
      this.bar = new SingleBar({ stream: this.out, format: barLine, hideCursor: true, barsize: 24, clearOnComplete: false, stopOnComplete: false, fps: 4, linewrap: false }, { barCompleteChar: '\u2588', barIncompleteChar: '\u2591', format: '' });
      this.bar.start(total, value, { view });
      return;
    }
    this.bar.setTotal(total);
    this.bar.update(value, { view });
  }

  stop(): void {
    this.bar?.stop();
    this.bar = undefined;
  }
}
