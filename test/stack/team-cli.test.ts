import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { TeamView } from '../../client/teams';
import { ScriptedProvider } from '../helpers/scripted-provider';
import { sternaTestWorker, testEnv, testServerAddress, uniqueTaskQueue } from '../helpers/temporal';

const cli = join(__dirname, '..', '..', 'cli', 'main.js');

async function sterna(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { namespace } = await testEnv();
  const env = { ...process.env, TEMPORAL_ADDRESS: await testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  return new Promise((resolve) =>
    execFile(process.execPath, [cli, ...args], { env, timeout: 90_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr })),
  );
}

describe('sterna team set|show (dev server)', function () {
  this.timeout(180_000);

  it('sets and reads a team\'s budget and GPU quota, and refuses bad values naming the flag', async () => {
    const taskQueue = uniqueTaskQueue('team-cli');
    const worker = await sternaTestWorker(taskQueue, { gce: new ScriptedProvider([{ zone: 'us-central1-a', spot: 0.2, onDemand: 0.7 }]) });
    await worker.runUntil(async () => {
      const set = await sterna(['team', 'set', 'vision', '--budget', '50', '--period', 'week', '--max-gpus', '2', '--task-queue', taskQueue, '--json']);
      assert.equal(set.code, 0, set.stderr);
      assert.deepEqual((JSON.parse(set.stdout) as TeamView).limits, { budget: { usd: 50, period: 'week' }, maxGpus: 2 });

      const cleared = await sterna(['team', 'set', 'vision', '--budget', 'none', '--task-queue', taskQueue, '--json']);
      assert.equal(cleared.code, 0, cleared.stderr);
      assert.deepEqual((JSON.parse(cleared.stdout) as TeamView).limits, { maxGpus: 2 });

      const shown = await sterna(['team', 'show', 'vision', '--task-queue', taskQueue]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.deepEqual(shown.stdout.split('\n').slice(0, 3), [
        'team vision',
        `  budget:  none; spent $0.00 this month (from ${(JSON.parse(cleared.stdout) as TeamView).period.start}), committed $0.00`,
        '  GPUs:    0 running of at most 2',
      ]);

      for (const [args, pattern] of [
        [['--max-gpus', '1.5'], /--max-gpus.*a whole number of GPUs/],
        [['--period', 'year'], /--period.*one of day, week, month/],
        [['--budget', '-3'], /--budget.*a number of USD above 0/],
      ] as [string[], RegExp][]) {
        const bad = await sterna(['team', 'set', 'vision', ...args, '--task-queue', taskQueue]);
        assert.equal(bad.code, 2, `${args.join(' ')}: ${bad.stderr}`);
        assert.match(bad.stderr, pattern);
      }
      // The workflow's validator refuses a period without a budget, and nothing changes.
      const refused = await sterna(['team', 'set', 'vision', '--period', 'day', '--task-queue', taskQueue]);
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /period applies to a budget; give budgetUsd with it/);
    });
  });
});
