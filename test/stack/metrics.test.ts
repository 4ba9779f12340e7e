/**
 * The worker's Prometheus metrics, end to end: `npm run worker`'s entry point in its own
 * process with STERNA_METRICS_PORT, a run on the emulator, and a real Prometheus server
 * (Debian's package, installed by the setup step) scraping the worker; the test asks
 * Prometheus's HTTP API, never the worker, what it scraped.
 */
import { strict as assert } from 'node:assert';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensurePrometheus } from '../../processes/prometheus';
import { loadWorkerConfig } from '../../config/worker-config';
import { DEFAULT_WORKER_HEAP_MB } from '../../workers/process-tuning';
import type { RunResult } from '../../workflows/run/views';
import { eventually, spawnLogged, type Spawned } from '../helpers/processes';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';
import { freePort } from '../helpers/temporal';

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** An instant query through Prometheus's HTTP API. */
async function query(prometheus: string, promql: string): Promise<Sample[]> {
  const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as { status: string; data: { resultType: string; result: Sample[] } };
  assert.equal(body.status, 'success', JSON.stringify(body));
  return body.data.result;
}

describe('worker metrics, scraped by a real Prometheus', function () {
  this.timeout(300_000);
  let stack: Stack;
  let worker: Spawned | undefined;
  let prometheus: Spawned | undefined;

  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await prometheus?.kill('SIGKILL');
    await worker?.kill('SIGTERM');
    await stack?.stop();
  });

  it('the configuration names the metrics variables when they are wrong', () => {
    const base = { STERNA_GCE_ENDPOINT: 'http://127.0.0.1:1' };
    assert.deepEqual(loadWorkerConfig({ ...base, STERNA_METRICS_PORT: '9464' }).metrics, { host: '0.0.0.0', port: 9464, sdkPort: 9465 });
    assert.equal(loadWorkerConfig(base).metrics, undefined);
    assert.throws(() => loadWorkerConfig({ ...base, STERNA_METRICS_PORT: 'ninety' }), /STERNA_METRICS_PORT/);
    assert.throws(() => loadWorkerConfig({ ...base, STERNA_METRICS_PORT: '9464', STERNA_SDK_METRICS_PORT: '9464' }), /STERNA_SDK_METRICS_PORT/);
  });

  it("Prometheus scrapes the worker: Sterna's run, attempt, cost and latency metrics, and the Temporal SDK's own", async () => {
    const binary = await ensurePrometheus();
    const [metricsPort, sdkPort, prometheusPort] = [await freePort(), await freePort(), await freePort()];
    // Through `npm run worker`'s launcher, which starts the worker process tuned.
    worker = stack.spawnWorker({ STERNA_PRICES: 'catalog', STERNA_METRICS_PORT: String(metricsPort), STERNA_METRICS_HOST: '127.0.0.1', STERNA_SDK_METRICS_PORT: String(sdkPort) }, { launcher: true });

    const dir = join(stack.dir, 'prometheus');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'prometheus.yml'),
      ['global:', '  scrape_interval: 1s', 'scrape_configs:', '  - job_name: sterna-worker', '    static_configs:', `      - targets: ['127.0.0.1:${metricsPort}']`, ''].join('\n'),
    );
    prometheus = spawnLogged(binary, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${prometheusPort}`], {
      logFile: join(dir, 'prometheus.log'),
    });
    const api = `http://127.0.0.1:${prometheusPort}`;

    const run = await stack.start(exampleSpec());
    const result = (await run.result()) as RunResult;
    assert.equal(result.status, 'completed');
    const attempt = result.attempts[0];
    const [billed] = (await stack.emulator.admin.billing()).records;

    // Prometheus saw the target up, and the attempt the run provisioned, by zone and model.
    await eventually('Prometheus to scrape the worker', async () => ((await query(api, 'up{job="sterna-worker"}'))[0]?.value[1] === '1' ? true : undefined), 120_000, 500);
    const attempts = await eventually('sterna_attempts_total in Prometheus', async () => {
      const samples = await query(api, 'sterna_attempts_total');
      return samples.length > 0 ? samples : undefined;
    }, 60_000, 500);
    assert.deepEqual(
      attempts.map((s) => ({ zone: s.metric.zone, model: s.metric.model, accelerator: s.metric.accelerator, value: Number(s.value[1]) })),
      [{ zone: attempt.zone, model: attempt.provisioningModel, accelerator: billed.accelerator, value: 1 }],
    );
    // Released: its cost at the offer price, and its GPU-hours.
    const cost = await eventually('sterna_cost_usd_total', async () => (await query(api, 'sum(sterna_cost_usd_total)'))[0], 30_000, 500);
    assert.ok(Number(cost.value[1]) > 0);
    const provisioned = await query(api, 'sum(sterna_provision_seconds_count{outcome="running"})');
    assert.equal(Number(provisioned[0]?.value[1]), 1);
    // Runs by phase come from visibility: this run is completed.
    const completed = await eventually('sterna_runs{phase="completed"}', async () => {
      const samples = await query(api, 'sterna_runs{phase="completed"}');
      return Number(samples[0]?.value[1]) >= 1 ? samples : undefined;
    }, 60_000, 500);
    assert.ok(Number(completed[0].value[1]) >= 1);
    // The SDK's runtime metrics, on the same target.
    const sdk = await query(api, 'count({job="sterna-worker", __name__=~"temporal_.+"})');
    assert.ok(Number(sdk[0]?.value[1]) > 0, 'the Temporal SDK runtime metrics are scraped through the same endpoint');
    // The workflow thread, where the run was cached, has its own heap beside the main thread's.
    const threads = await query(api, 'sterna_thread_heap_used_bytes{job="sterna-worker"}');
    assert.ok(threads.length >= 1 && threads.every((t) => Number(t.value[1]) > 0), `workflow threads' heaps ${JSON.stringify(threads)}`);

    // The worker runs in the launcher's child with the tuned flags, and stops gracefully on the launcher's SIGTERM.
    const [workerPid] = readFileSync(`/proc/${worker.child.pid}/task/${worker.child.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    assert.ok(readFileSync(`/proc/${workerPid}/cmdline`, 'utf8').split('\0').includes(`--max-old-space-size=${DEFAULT_WORKER_HEAP_MB}`));
    await worker.kill('SIGTERM');
    assert.equal(await worker.exited, 0, 'the launcher exits as its worker did: cleanly');
    assert.equal(existsSync(`/proc/${workerPid}`), false, 'and the worker is gone');
  });
});
