/**
 * The scale benchmark: its rules (what is a slot wait, which insert replaces which
 * preemption, what is a read) without a server, and a tiny slice of the real thing —
 * five runs on a spawned worker, dev server and synthetic-guest emulator — whose JSON
 * line carries every figure the README's table needs. Timing is not asserted.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ApiUsageView } from '../../emulator/admin-client';
import { apiFigures, executionFacts, peakOverlap, preemptionLatencies, replacementSteps, runFacts, summarizeHistories, windowFigures, type HistoryEvent } from '../../bench/scale/analysis';
import { parseScaleOptions, ScaleOptionError } from '../../bench/scale/options';
import { activitySlotsOf } from '../../bench/scale/slots';
import { memoryOf } from '../../bench/scale/memory';

const at = (ms: number) => ({ seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 });

function activity(id: number, name: string, scheduledMs: number, startedMs: number, attempt = 1): HistoryEvent[] {
  return [
    { eventId: id, eventTime: at(scheduledMs), activityTaskScheduledEventAttributes: { activityType: { name } } },
    { eventId: id + 1, eventTime: at(startedMs), activityTaskStartedEventAttributes: { scheduledEventId: id, attempt } },
  ];
}

describe('bench:scale rules', () => {
  it('counts a run as waiting for a slot only when a first try started more than a second after it was scheduled', () => {
    const started: HistoryEvent = { eventId: 1, eventTime: at(0), workflowExecutionStartedEventAttributes: {} };
    const completed: HistoryEvent = { eventId: 99, eventTime: at(3_600_000), workflowExecutionCompletedEventAttributes: {} };
    const waited = runFacts('a', [executionFacts([started, ...activity(10, 'provision', 1000, 4000), completed])]);
    const retried = runFacts('b', [executionFacts([started, ...activity(10, 'observe', 1000, 9000, 3), ...activity(20, 'observe', 10_000, 10_005), completed])]);
    const summary = summarizeHistories([waited, retried], 3_600_000);
    assert.equal(summary.slotWaits, 1);
    assert.deepEqual(summary.slotWaitActivities, { provision: 1 });
    assert.equal(summary.activityRetries, 1);
    assert.equal(summary.runHours, 2);
    assert.equal(summary.eventsPerRunHour, (4 + 6) / 2);
    // The steady window leaves out the start burst: the wait at 1 s is not in [2 s, 1 h).
    assert.equal(windowFigures([waited, retried], 2000, 3_600_000).slotWaits, 0);
    assert.equal(windowFigures([waited, retried], 0, 3_600_000).slotWaits, 1);
  });

  it('follows a continue-as-new chain and adds its executions up', () => {
    const first = executionFacts([
      { eventId: 1, eventTime: at(0), workflowExecutionStartedEventAttributes: {} },
      { eventId: 2, eventTime: at(60_000), workflowExecutionContinuedAsNewEventAttributes: { newExecutionRunId: 'run-2' } },
    ]);
    assert.equal(first.continuedAsRunId, 'run-2');
    const second = executionFacts([
      { eventId: 1, eventTime: at(60_000), workflowExecutionStartedEventAttributes: {} },
      { eventId: 2, eventTime: at(120_000), workflowExecutionFailedEventAttributes: {} },
    ]);
    const run = runFacts('w', [first, second]);
    assert.deepEqual({ executions: run.executions, events: run.events, end: run.end, ms: run.endMs! - run.startMs }, { executions: 2, events: 4, end: 'failed', ms: 120_000 });
  });

  it("pairs a preemption with the first later insert of the same run's next attempt, never another run's", () => {
    const latencies = preemptionLatencies(
      [
        { name: 'st-run-a-hash-exec-a1', atMs: 10_000 },
        { name: 'st-run-b-hash-exec-a2', atMs: 10_000 },
      ],
      [
        { name: 'st-run-a-hash-exec-a1', atMs: 0 },
        { name: 'st-run-a-hash-exec-a2', atMs: 13_500 },
        { name: 'st-run-a-hash-exec-a3', atMs: 20_000 },
        // Run b's only later insert belongs to run a's name space: no match.
        { name: 'st-run-b-hash-exec-a1', atMs: 12_000 },
      ],
    );
    assert.deepEqual(latencies, { seconds: [3.5], unreplaced: ['st-run-b-hash-exec-a2'] });
  });

  it("splits a preempted run's way to its replacement's create into steps, from the history and the preemption's time", () => {
    const input = (name: string) => ({ payloads: [{ data: new TextEncoder().encode(JSON.stringify({ ref: { name }, createMayBeInFlight: false })) }] });
    const completedAt = (id: number, scheduledEventId: number, ms: number): HistoryEvent => ({ eventId: id, eventTime: at(ms), activityTaskCompletedEventAttributes: { scheduledEventId } });
    const run = executionFacts([
      { eventId: 1, eventTime: at(0), workflowExecutionStartedEventAttributes: {} },
      { eventId: 5, eventTime: at(12_000), workflowExecutionSignaledEventAttributes: { signalName: 'observed' } },
      { eventId: 10, eventTime: at(13_000), activityTaskScheduledEventAttributes: { activityType: { name: 'release' }, input: input('st-r-h-e-a1') } },
      { eventId: 11, eventTime: at(13_500), activityTaskStartedEventAttributes: { scheduledEventId: 10, attempt: 1 } },
      completedAt(12, 10, 14_000),
      ...activity(20, 'findCapacity', 15_000, 17_000),
      completedAt(22, 20, 18_000),
      ...activity(30, 'provision', 19_000, 19_250),
      // The run's final release starts no new path.
      { eventId: 40, eventTime: at(90_000), activityTaskScheduledEventAttributes: { activityType: { name: 'release' }, input: input('st-r-h-e-a2') } },
    ]);
    assert.equal(run.replacements.length, 1);
    const { paths, steps } = replacementSteps(run.replacements, new Map([['st-r-h-e-a1', 10_000]]));
    assert.equal(paths, 1);
    assert.deepEqual(
      steps.map((s) => [s.step, s.p50S]),
      [
        ['preemption -> signal', 2],
        ['signal -> release scheduled', 1],
        ['release', 1],
        ['release scheduled -> findCapacity scheduled', 2],
        ['findCapacity schedule -> start', 2],
        ['findCapacity', 1],
        ['findCapacity -> provision scheduled', 1],
        ['provision schedule -> start', 0.25],
      ],
    );
    assert.deepEqual(replacementSteps(run.replacements, new Map([['st-r-h-e-a1', 10_000]])).slowest, {
      released: 'st-r-h-e-a1',
      seconds: 9,
      steps: {
        'preemption -> signal': 2,
        'signal -> release scheduled': 1,
        release: 1,
        'release scheduled -> findCapacity scheduled': 2,
        'findCapacity schedule -> start': 2,
        findCapacity: 1,
        'findCapacity -> provision scheduled': 1,
        'provision schedule -> start': 0.25,
      },
    });
    // A release of a resource that was not preempted (a stockout, a switch) is not a preemption's path.
    assert.equal(replacementSteps(run.replacements, new Map()).paths, 0);

    // Released beside the placement: the release ends after the replacement's create started.
    const beside = executionFacts([
      { eventId: 5, eventTime: at(12_000), workflowExecutionSignaledEventAttributes: { signalName: 'observed' } },
      { eventId: 10, eventTime: at(13_000), activityTaskScheduledEventAttributes: { activityType: { name: 'release' }, input: input('st-r-h-e-a1') } },
      ...activity(20, 'findCapacity', 13_000, 13_100),
      completedAt(22, 20, 13_500),
      ...activity(30, 'provision', 14_000, 14_100),
      completedAt(40, 10, 20_000),
    ]);
    const steps2 = replacementSteps(beside.replacements, new Map([['st-r-h-e-a1', 10_000]])).steps;
    assert.deepEqual(
      steps2.filter((s) => s.step === 'release' || s.step === 'release scheduled -> findCapacity scheduled').map((s) => [s.step, s.p50S]),
      [
        ['release', 7],
        ['release scheduled -> findCapacity scheduled', 0],
      ],
    );
  });

  it('counts every call but inserts and deletes as a read, per project, minus an earlier reading', () => {
    const view = (elapsedSeconds: number, get: number, insert: number, limited: number): ApiUsageView => ({
      since: '',
      now: '',
      elapsedSeconds,
      projects: [
        {
          project: 'p',
          totals: { calls: 0, rateLimited: 0, errors: 0 },
          methods: { 'compute.instances.get': { calls: get, rateLimited: limited, errors: 0 }, 'compute.instances.insert': { calls: insert, rateLimited: 0, errors: 0 } },
        },
        { project: 'other', totals: { calls: 0, rateLimited: 0, errors: 0 }, methods: { 'compute.instances.get': { calls: 1000, rateLimited: 0, errors: 0 } } },
      ],
    });
    const figures = apiFigures(view(120, 50, 4, 2), 'p', view(60, 20, 4, 0));
    assert.deepEqual({ calls: figures.calls, reads: figures.reads, writes: figures.writes, rateLimited: figures.rateLimited, elapsed: figures.elapsedSeconds }, { calls: 30, reads: 30, writes: 0, rateLimited: 2, elapsed: 60 });
  });

  it('counts runs alive at once from starts and closes, a run still open to the end, back-to-back runs not overlapping', () => {
    const spans = [
      { fromMs: 0, toMs: 10 },
      { fromMs: 10, toMs: 20 }, // starts as the first closes
      { fromMs: 5, toMs: 15 },
      { fromMs: 12 }, // never closed
    ];
    assert.equal(peakOverlap(spans, 30), 3);
    assert.equal(peakOverlap([{ fromMs: 0 }, { fromMs: 1 }], 2), 2);
    assert.equal(peakOverlap([], 5), 0);
  });

  it("reads the activity worker's free and used slots from the SDK's exposition, not the workflow worker's", () => {
    const text = [
      '# HELP temporal_worker_task_slots_available Current number of available slots per task type',
      'temporal_worker_task_slots_available{namespace="default",service_name="temporal-core-sdk",task_queue="q",worker_type="WorkflowWorker"} 2',
      'temporal_worker_task_slots_available{namespace="default",service_name="temporal-core-sdk",task_queue="q",worker_type="ActivityWorker"} 997',
      'temporal_worker_task_slots_used{namespace="default",service_name="temporal-core-sdk",task_queue="q",worker_type="ActivityWorker"} 3',
      'temporal_worker_task_slots_used{namespace="default",service_name="temporal-core-sdk",task_queue="q",worker_type="WorkflowWorker"} 0',
    ].join('\n');
    assert.deepEqual(activitySlotsOf(text), { free: 997, used: 3 });
    assert.equal(activitySlotsOf(text.split('\n').filter((l) => !l.includes('slots_used')).join('\n')), undefined);
  });

  it("splits the worker's memory from prom-client's process metrics, in MB, and reads nothing from a text without them", () => {
    const MB = 2 ** 20;
    const text = [
      '# TYPE process_resident_memory_bytes gauge',
      `process_resident_memory_bytes ${900 * MB}`,
      `nodejs_heap_size_total_bytes ${600 * MB}`,
      `nodejs_heap_size_used_bytes ${512 * MB}`,
      `nodejs_heap_space_size_used_bytes{space="old"} ${400 * MB}`,
      'nodejs_external_memory_bytes 1.048576e+8',
      `sterna_thread_heap_used_bytes{thread="1"} ${150 * MB}`,
      `sterna_thread_heap_used_bytes{thread="2"} ${30 * MB}`,
      `sterna_thread_heap_total_bytes{thread="1"} ${160 * MB}`,
      `sterna_thread_heap_total_bytes{thread="2"} ${40 * MB}`,
      'nodejs_gc_duration_seconds_bucket{le="0.001",kind="minor"} 10',
      'nodejs_gc_duration_seconds_sum{kind="minor"} 12.5',
      'nodejs_gc_duration_seconds_sum{kind="major"} 3.25',
    ].join('\n');
    assert.deepEqual(memoryOf(text), { rssMb: 900, heapUsedMb: 512, heapTotalMb: 600, externalMb: 100, threadsHeapUsedMb: 180, threadsHeapTotalMb: 200, gcSeconds: { minor: 12.5, major: 3.25 } });
    assert.equal(memoryOf('sterna_runs{phase="training"} 3'), undefined);
  });

  it('refuses bad flags naming the flag and what it takes', () => {
    const base = { runs: '5', duration: '1m', preemptionRate: '2', seed: '1', checkpointEvery: '60', observer: 'auto' };
    assert.throws(() => parseScaleOptions({ ...base, runs: '0' }), (err: Error) => err instanceof ScaleOptionError && /^--runs: expected a whole number from 1/.test(err.message));
    assert.throws(() => parseScaleOptions({ ...base, duration: 'soon' }), /^ScaleOptionError: --duration: expected a duration such as 90s/);
    assert.throws(() => parseScaleOptions({ ...base, observer: 'maybe' }), /--observer: expected one of on, off, auto/);
    assert.throws(() => parseScaleOptions({ ...base, pollSeconds: '0.1' }), /--poll-seconds: the spec allows recovery.pollSeconds from 0.2 to 60/);
    assert.equal(parseScaleOptions({ ...base, runs: '500' }).rampSeconds, 50);
    assert.throws(() => parseScaleOptions({ ...base, teamNamespaces: '17' }), /--team-namespaces: expected a whole number from 0 to 16/);
    assert.deepEqual([parseScaleOptions(base).teamNamespaces, parseScaleOptions({ ...base, teamNamespaces: '2' }).teamNamespaces], [0, 2]);
  });
});

describe('bench:scale on the real stack (5 runs over two team namespaces)', function () {
  this.timeout(300_000);

  it('runs every run to completion on one worker and reports the figures as the JSON last line', async () => {
    const script = join(__dirname, '..', '..', 'bench', 'scale', 'main.js');
    const child = spawn(process.execPath, [script, '--runs', '5', '--duration', '20s', '--preemption-rate', '120', '--seed', '3', '--team-namespaces', '2', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, `bench:scale exited with ${code}:\n${stderr}`);
    const lines = stdout.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]) as Record<string, unknown>;
    for (const key of ['runs', 'completed', 'workerPeakRssMb', 'apiReadsPerRunMinute', 'rateLimited', 'slotWaits', 'preemptions', 'preemptionToInsertP50S', 'preemptionToInsertP99S']) {
      assert.ok(key in result, `the JSON line lacks ${key}`);
    }
    assert.deepEqual({ runs: result.runs, completed: result.completed, failed: result.failed, unfinished: result.unfinished, teamNamespaces: result.teamNamespaces }, { runs: 5, completed: 5, failed: 0, unfinished: 0, teamNamespaces: 2 });
    assert.ok(typeof result.peakRunsAlive === 'number' && result.peakRunsAlive >= 1 && result.peakRunsAlive <= 5, `peakRunsAlive ${String(result.peakRunsAlive)}`);
    assert.ok(result.design === 'per-run-looks' || result.design === 'fleet-observer', `design ${String(result.design)}`);
    for (const key of ['workerPeakRssMb', 'apiReadsPerRunMinute', 'historyEventsPerRunHour', 'workerCpuSecondsPerRunHour']) {
      assert.ok(typeof result[key] === 'number' && (result[key] as number) > 0, `${key} is ${String(result[key])}`);
    }
    // Every preempted VM was training, so its run must have inserted a replacement.
    assert.equal(result.preemptionsUnreplaced, 0);
    // The worker's own slot gauges were read, and five runs never used up a thousand slots.
    const slots = result.activitySlots as { freeMin: number; usedMax: number; samples: number } | undefined;
    assert.ok(slots && slots.samples > 0 && slots.freeMin > 0 && slots.usedMax >= 1, `activitySlots ${JSON.stringify(slots)}`);
    if ((result.preemptions as number) > 0) assert.equal(typeof result.preemptionToInsertP50S, 'number');
    // The worker's own process metrics were read: its heap and what lies outside it.
    const memory = result.workerMemory as { heapUsedMaxMb: number; threadsHeapUsedMaxMb: number; samples: number } | undefined;
    assert.ok(memory && memory.samples > 0 && memory.heapUsedMaxMb > 0, `workerMemory ${JSON.stringify(memory)}`);
    // And the workflow thread's, where the runs are cached.
    assert.ok(memory.threadsHeapUsedMaxMb > 0, `workerMemory ${JSON.stringify(memory)}`);
  });
});
