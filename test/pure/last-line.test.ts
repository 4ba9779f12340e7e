/**
 * The live attempt's last printed line, server-less: what the agent publishes
 * (`sterna/last-line`) parsed and bounded, the reducer keeping the live attempt's line
 * only, the web UI's current details and the status showing it, and the state carrying
 * it through continue-as-new.
 */
import { strict as assert } from 'node:assert';
import { parseAgentValues } from '../../activities/agent/script';
import { lastLineLines } from '../../cli/format';
import { acceptContinuation } from '../../workflows/run/continuation';
import { boundLastLine, LAST_LINE_CHARS, markdownCode } from '../../workflows/run/last-line';
import type { RunState } from '../../workflows/run/state';
import { currentDetailsOf, statusOf } from '../../workflows/run/views';
import { EXEC, offerIn, RunHarness, specOf, T0 } from '../helpers/run-harness';

const WORKFLOW = 'run-last-line';
const OFFERS = [offerIn('us-central1-a', 0.2), offerIn('us-east1-b', 0.25)];

/** The line the run keeps (read through a function: an assertion on it does not narrow the next read). */
function kept(run: RunHarness): RunState['lastLine'] {
  return run.state.lastLine;
}

class Run extends RunHarness {
  constructor() {
    super(WORKFLOW, specOf());
  }

  /** Provisioned (attempt 1) and training at t = 0. */
  training(): this {
    this.send({ kind: 'start' });
    this.provisioned(OFFERS);
    this.observe(1, { phase: 'training', step: 0 });
    return this;
  }
}

describe('the last printed line (pure, no server)', () => {
  describe('as the agent publishes it', () => {
    it('is read from sterna/last-line, bounded again: control characters out, at most 160 characters, nothing when blank', () => {
      assert.equal(parseAgentValues({ phase: 'training', 'last-line': 'epoch 3 loss 0.41' }).lastLine, 'epoch 3 loss 0.41');
      assert.equal(parseAgentValues({ phase: 'training' }).lastLine, undefined);
      assert.equal(parseAgentValues({ 'last-line': ' \u0007\u001b \r\n ' }).lastLine, undefined);
      assert.equal(boundLastLine('a\u0000b\u001b[31mc\u0085d'), 'ab[31mcd');
      // Characters, not UTF-16 units: an emoji is one and is never cut in half.
      const long = '😀'.repeat(LAST_LINE_CHARS + 5);
      const bounded = boundLastLine(long)!;
      assert.equal(Array.from(bounded).length, LAST_LINE_CHARS);
      assert.ok(bounded.endsWith('😀…'));
      assert.equal(boundLastLine('x'.repeat(LAST_LINE_CHARS)), 'x'.repeat(LAST_LINE_CHARS), 'exactly 160 is not cut');
      assert.equal(boundLastLine('lone \ud800 surrogate'), 'lone  surrogate');
    });

    it('is Markdown inline code whatever it holds: backticks fenced, no $$', () => {
      assert.equal(markdownCode('loss 0.4'), '`loss 0.4`');
      assert.equal(markdownCode('a `b` c'), '``a `b` c``');
      assert.equal(markdownCode('`x`'), '`` `x` ``');
      assert.ok(!markdownCode('cost $$ 5 $$$').includes('$$'));
    });
  });

  describe('kept by the run', () => {
    it('keeps the live attempt\'s newest line, and shows it in the current details and the status', () => {
      const run = new Run().training();
      assert.equal(kept(run), undefined);
      assert.ok(!currentDetailsOf(run.state, run.spec, run.now).includes('Last line'));
      run.at(10).observe(1, { phase: 'training', step: 5, lastLine: 'step 5 loss 1.25 $$x$$' });
      assert.deepEqual(run.state.lastLine, { attempt: 1, text: 'step 5 loss 1.25 $$x$$', atMs: T0 + 10_000 });
      const details = currentDetailsOf(run.state, run.spec, run.now);
      assert.match(details, /\*\*Last line\*\* `step 5 loss 1\.25 \$\u200b\$x\$\u200b\$`$/);
      assert.ok(!details.includes('$$'));
      assert.equal(statusOf(run.state, run.now, run.spec).lastLine, 'step 5 loss 1.25 $$x$$');
      assert.deepEqual(lastLineLines(statusOf(run.state, run.now, run.spec)), ['  last line: step 5 loss 1.25 $$x$$'], '`sterna status` prints it');
      // The same line heard again changes nothing (not even when it was heard).
      const before = run.state;
      run.at(20).observe(1, { phase: 'training', step: 6, lastLine: 'step 5 loss 1.25 $$x$$' });
      assert.equal(run.state.lastLine, before.lastLine);
      // A snapshot without one (the observer dropped the agent's values) keeps the last.
      run.at(30).observe(1, { phase: 'training', step: 7 });
      assert.equal(run.state.lastLine?.text, 'step 5 loss 1.25 $$x$$');
      run.at(40).observe(1, { phase: 'training', step: 8, lastLine: 'step 8 loss 1.01' });
      assert.deepEqual(run.state.lastLine, { attempt: 1, text: 'step 8 loss 1.01', atMs: T0 + 40_000 });
      assert.ok(Object.isFrozen(run.state.lastLine), 'written by the reducer on its draft, frozen');
    });

    it('takes the line of a failing attempt\'s last word, bounds a forged one, and ignores a stale attempt\'s', () => {
      const run = new Run().training();
      run.at(5).observe(1, { phase: 'training', lastLine: `${'y'.repeat(300)}\u0007` });
      assert.equal(Array.from(run.state.lastLine!.text).length, LAST_LINE_CHARS, 'a signal is bounded as the agent bounds it');
      // The attempt ends (its exit with its last line): the line is kept, and shown with the failure.
      const action = run.at(9).observe(1, { phase: 'exited', exitCode: 3, lastLine: 'Traceback: ValueError: bad shape' });
      assert.equal(action.kind, 'release');
      assert.equal(run.state.lastLine?.text, 'Traceback: ValueError: bad shape');
      assert.equal(run.state.lastLine?.attempt, 1);
    });

    it('shows only the live attempt\'s line: a preempted attempt\'s line is not the replacement\'s', () => {
      const run = new Run().training();
      run.at(10).observe(1, { phase: 'training', step: 10, lastLine: 'attempt one, step 10' });
      run.at(20).observe(1, { lifecycle: 'terminated', preempted: true, lastLine: 'attempt one, SIGTERM: saving' });
      assert.equal(run.state.lastLine?.text, 'attempt one, SIGTERM: saving');
      assert.equal(run.released(1).kind, 'find-capacity');
      assert.deepEqual(run.send({ kind: 'offers', offers: OFFERS }), { kind: 'provision', attempt: 2 });
      run.send({ kind: 'provisioned', attempt: 2, startedAt: new Date(run.now).toISOString(), adopted: false, observerAsked: true });
      // Attempt 2 has printed nothing yet: neither the details nor the status show attempt 1's line.
      assert.ok(!currentDetailsOf(run.state, run.spec, run.now).includes('Last line'));
      assert.equal(statusOf(run.state, run.now, run.spec).lastLine, undefined);
      // A late word from attempt 1 is not the live attempt's: ignored.
      run.at(30).observe(1, { lifecycle: 'terminated', preempted: true, lastLine: 'attempt one, late' });
      assert.equal(run.state.lastLine?.text, 'attempt one, SIGTERM: saving');
      run.at(40).observe(2, { phase: 'training', step: 11, lastLine: 'attempt two, resumed at 10' });
      assert.deepEqual(run.state.lastLine, { attempt: 2, text: 'attempt two, resumed at 10', atMs: T0 + 40_000 });
      assert.match(currentDetailsOf(run.state, run.spec, run.now), /\*\*Last line\*\* `attempt two, resumed at 10`/);
    });

    it('is carried through continue-as-new, and a forged one (too long, no attempt) is refused', () => {
      const run = new Run().training();
      run.at(10).observe(1, { phase: 'training', step: 5, lastLine: 'carried line' });
      const continued = () => ({ continued: true as const, spec: run.spec, state: JSON.parse(JSON.stringify(run.state)) as RunState });
      const execution = { workflowId: WORKFLOW, execution: EXEC, continuedFromExecutionRunId: 'previous-run', attempt: 1 };
      assert.deepEqual(acceptContinuation(continued(), execution).state.lastLine, run.state.lastLine);
      const tooLong = continued();
      tooLong.state.lastLine = { attempt: 1, text: 'z'.repeat(100_000), atMs: T0 };
      assert.throws(() => acceptContinuation(tooLong, execution), /state\.lastLine\.text/);
      const noAttempt = continued();
      (noAttempt.state as { lastLine?: unknown }).lastLine = { text: 'x', atMs: T0 };
      assert.throws(() => acceptContinuation(noAttempt, execution), /state\.lastLine\.attempt/);
    });
  });
});
