/**
 * Tenancy without a server (docs/tenancy.md): the worker's namespace configuration, and the
 * guards of the activities that cross namespaces. A team can start any workflow type in its
 * own namespace with any input; what its workflows ask of the worker is refused unless the
 * server's record of the caller (its namespace, type and id) allows it. The guards come
 * before any call to Temporal, so the clients here point nowhere.
 * test/stack/tenancy.test.ts proves the rest against a server with JWT authorization.
 */
import { strict as assert } from 'node:assert';
import type { Info as ActivityInfo } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createFleetActivities } from '../../activities/fleet';
import { NamespaceClients } from '../../activities/namespaces';
import { createReaperActivities } from '../../activities/reaper';
import { createTeamActivities } from '../../activities/teams';
import { loadWorkerConfig, resolveTenancy, WorkerConfigError } from '../../config/worker-config';

describe('tenancy: configuration and the activities\' guards', () => {
  const base = { STERNA_GCE_ENDPOINT: 'http://127.0.0.1:9' };

  it('reads the team namespaces and the system namespace, and refuses what cannot work, naming the variable', () => {
    assert.equal(loadWorkerConfig(base).tenancy, undefined);
    assert.deepEqual(resolveTenancy(undefined, 'default'), { system: 'default', teams: ['default'], mode: 'single' });
    const config = loadWorkerConfig({ ...base, STERNA_TEAM_NAMESPACES: ' team-a, team-b ' });
    assert.deepEqual(config.tenancy, { system: undefined, teams: ['team-a', 'team-b'] });
    assert.deepEqual(resolveTenancy(config.tenancy, 'sterna-system'), { system: 'sterna-system', teams: ['team-a', 'team-b'], mode: 'namespaces' });
    assert.deepEqual(resolveTenancy(loadWorkerConfig({ ...base, STERNA_TEAM_NAMESPACES: 'team-a', STERNA_SYSTEM_NAMESPACE: 'ops' }).tenancy, 'default').system, 'ops');
    const problem = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        assert.ok(err instanceof WorkerConfigError, String(err));
        return err.message;
      }
      assert.fail('accepted');
    };
    assert.match(problem(() => resolveTenancy(loadWorkerConfig({ ...base, STERNA_TEAM_NAMESPACES: 'team-a,sterna-system' }).tenancy, 'sterna-system')), /STERNA_TEAM_NAMESPACES: sterna-system is the system namespace/);
    assert.match(problem(() => resolveTenancy(loadWorkerConfig({ ...base, STERNA_TEAM_NAMESPACES: 'team-a,team-a' }).tenancy, 'sys')), /team-a is listed twice/);
    assert.match(problem(() => loadWorkerConfig({ ...base, STERNA_SYSTEM_NAMESPACE: 'ops' })), /STERNA_SYSTEM_NAMESPACE is set without STERNA_TEAM_NAMESPACES/);
    assert.match(problem(() => loadWorkerConfig({ ...base, STERNA_TEAM_NAMESPACES: 'team a' })), /STERNA_TEAM_NAMESPACES.*a Temporal namespace name/);
  });

  /** The refusal an activity called from `namespace` ends with (no server is reached: the guard comes first). */
  async function refusal(namespace: string, call: () => Promise<unknown>, info: Partial<ActivityInfo> = {}): Promise<{ type?: string; nonRetryable?: boolean; message: string }> {
    // Refusals are what is asserted: the activity's own failure log stays quiet.
    const env = new MockActivityEnvironment({ namespace, taskQueue: 'q', workflowType: 'trainingRun', workflowExecution: { workflowId: 'run-1', runId: 'r' }, ...info }, { logger: new DefaultLogger('ERROR') });
    try {
      await env.run(call);
    } catch (err) {
      if (err instanceof ApplicationFailure) return { type: err.type ?? undefined, nonRetryable: err.nonRetryable ?? undefined, message: err.message };
      throw err;
    }
    return assert.fail(`allowed from ${namespace}`);
  }

  it('acts for the fleet only when called from the system namespace, and for a team only from that team\'s namespace', async () => {
    const unreachable = new Client({ connection: Connection.lazy({ address: '127.0.0.1:9' }), namespace: 'sterna-system' });
    const namespaces = new NamespaceClients({ system: 'sterna-system', teams: ['team-a', 'team-b'], mode: 'namespaces' }, () => unreachable);
    const teams = createTeamActivities({ namespaces });
    const reaper = createReaperActivities({ providers: {}, client: unreachable, namespaces });
    const fleet = createFleetActivities({ providers: {}, client: unreachable, namespaces });
    const request = { runId: 'someone-else', gpus: 1, reserveUsd: 0, priority: 0, askedAt: 0 };
    // A run in a namespace that is not a team's.
    const notTeam = await refusal('team-c', () => teams.askAdmission({ team: 'default', request }));
    assert.deepEqual([notTeam.type, notTeam.nonRetryable], ['NamespaceNotAllowed', true]);
    assert.match(notTeam.message, /namespace team-c, which is not configured as a team/);
    // A run in team A's namespace naming team B.
    const claims = await refusal('team-a', () => teams.askAdmission({ team: 'team-b', request }));
    assert.deepEqual([claims.type, claims.nonRetryable], ['InvalidSpec', true]);
    // Fleet work asked from a team's namespace (a fleet workflow the team started there).
    for (const [what, call, info] of [
      ['tellRun', () => teams.tellRun({ runId: 'x', decision: { runId: 'x', outcome: 'admitted', team: 'team-b' } }), { workflowType: 'teamLedger', workflowExecution: { workflowId: 'sterna-team/q/team-b', runId: 'r' } }],
      ['closedRuns', () => teams.closedRuns({ runIds: ['x'] }), { workflowType: 'teamLedger', workflowExecution: { workflowId: 'sterna-team/q/team-b', runId: 'r' } }],
      ['reaperList', () => reaper.reaperList({ backend: 'gce' }), { workflowType: 'reaper' }],
      ['reaperOwners', () => reaper.reaperOwners({ workflowIds: ['x'] }), { workflowType: 'reaper' }],
      ['watchFleet', () => fleet.watchFleet({ backend: 'gce' } as Parameters<typeof fleet.watchFleet>[0]), { workflowType: 'fleetObserver' }],
    ] as const) {
      const refused = await refusal('team-a', call, info as Partial<ActivityInfo>);
      assert.equal(refused.type, 'NamespaceNotAllowed', what);
      assert.match(refused.message, /only workflows of the system namespace sterna-system/, what);
    }
    // A ledger of the system namespace whose id names no configured team.
    const stray = await refusal('sterna-system', () => teams.tellRun({ runId: 'x', decision: { runId: 'x', outcome: 'admitted', team: 'team-c' } }), { workflowType: 'teamLedger', workflowExecution: { workflowId: 'sterna-team/q/team-c', runId: 'r' } });
    assert.equal(stray.type, 'NamespaceNotAllowed');
  });
});
