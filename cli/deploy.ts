/**
 * `sterna deploy status|promote`: the versions of the worker deployment (docs/versions.md).
 *
 *   sterna deploy status [--deployment sterna] [--json]
 *   sterna deploy promote sterna-3f2a9c01b7de [--deployment sterna]
 */
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { describeDeployment, promoteVersion } from '../client/deployments';

export function addDeployCommands(program: Command, connect: () => Promise<Client>): void {
  const deploy = program.command('deploy').description('the worker deployment\'s versions: which is current, which still drain');
  const deploymentOption = ['--deployment <name>', 'the worker deployment (STERNA_DEPLOYMENT of the workers)', process.env.STERNA_DEPLOYMENT ?? 'sterna'] as const;

  deploy
    .command('status')
    .description('the current version and each older one: draining (runs still pinned to it) or drained (its workers may stop)')
    .option(...deploymentOption)
    .option('--json', 'print {deployment, current, versions: [{buildId, state, createdAt}]}')
    .action(async (opts: { deployment: string; json?: boolean }) => {
      const summary = await describeDeployment(await connect(), opts.deployment);
      if (opts.json) return console.log(JSON.stringify(summary));
      console.log(`deployment ${summary.deployment}: current ${summary.current ?? '(none: new runs go to unversioned workers)'}`);
      for (const v of summary.versions) console.log(`  ${v.buildId.padEnd(24)} ${v.state.padEnd(9)} ${v.createdAt ?? ''}${v.state === 'drained' ? '  (its workers may stop)' : ''}`);
    });

  deploy
    .command('promote')
    .description('make a version current: new runs start on it, running ones move at their next continue-as-new')
    .argument('<buildId>', 'the version\'s build id, as its worker printed it')
    .option(...deploymentOption)
    .action(async (buildId: string, opts: { deployment: string }) => {
      await promoteVersion(await connect(), opts.deployment, buildId);
      console.log(`${opts.deployment} ${buildId} is current; older versions drain as their runs continue as new (sterna deploy status)`);
    });
}
