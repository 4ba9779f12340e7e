/**
 * Workflow histories as JSON files, the format `temporal workflow show --output json`
 * writes and `historyFromJSON` reads (the SDK's own historyToJSON needs the protobuf
 * runtime it was built with, which npm may install twice).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { findTemporalCli } from '../../config/temporal-cli';
import { testEnv, testServerAddress } from './temporal';

const run = promisify(execFile);

export async function saveHistory(file: string, workflowId: string, runId?: string): Promise<void> {
  const cli = await findTemporalCli();
  if (!cli) throw new Error('the Temporal CLI is installed by npm test');
  const env = await testEnv();
  const args = ['workflow', 'show', '--address', await testServerAddress(), '--namespace', env.namespace ?? 'default', '--workflow-id', workflowId, '--output', 'json'];
  if (runId) args.push('--run-id', runId);
  const { stdout } = await run(cli, args, { maxBuffer: 64 * 1024 * 1024 });
  writeFileSync(file, stdout);
}
