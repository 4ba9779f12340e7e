import { strict as assert } from 'node:assert';
import { Worker } from '@temporalio/worker';
import { parseCliVersion } from '../../processes/temporal-cli';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { searchAttributeCreateCommands, sternaSearchAttributes } from '../../workflows/search-attributes';
import { testEnv, uniqueTaskQueue, workflowBundle } from '../helpers/temporal';
import { sternaDataConverter } from '../../codec/data-converter';

describe('foundation', () => {
  it('runs a workflow with one activity to completion on a real dev server', async () => {
    const env = await testEnv();
    const taskQueue = uniqueTaskQueue('echo');
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace,
      taskQueue,
      workflowBundle: await workflowBundle(require.resolve('../workflows/echo')),
      activities: { shout: async (text: string) => text.toUpperCase() },
      dataConverter: sternaDataConverter(),
    });
    const result = await worker.runUntil(
      env.client.workflow.execute('echo', { taskQueue, workflowId: taskQueue, args: ['tern'] }),
    );
    assert.equal(result, 'TERN!');
  });

  it('registers every Sterna search attribute on the dev server', async () => {
    const env = await testEnv();
    const { customAttributes } = await env.connection.operatorService.listSearchAttributes({ namespace: env.namespace });
    for (const key of sternaSearchAttributes) assert.ok(customAttributes?.[key.name] !== undefined, `${key.name} is registered`);
  });

  it('documents in the README the exact commands that register the attributes on a cluster', () => {
    const readme = readFileSync(join(__dirname, '..', '..', '..', 'README.md'), 'utf8');
    for (const line of searchAttributeCreateCommands()) assert.ok(readme.includes(line), `README has: ${line}`);
  });

  it('reads the Temporal CLI version line', () => {
    assert.deepEqual(parseCliVersion('temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)'), [1, 5]);
    assert.equal(parseCliVersion('command not found'), undefined);
  });
});
