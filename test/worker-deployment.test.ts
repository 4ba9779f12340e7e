/**
 * Which starting worker makes its version current (workers/deployment.ts), server-less:
 * only a new build, and only when asked to; the same code is the same version.
 */
import { strict as assert } from 'node:assert';
import { temporal } from '@temporalio/proto';
import { buildIdOf, shouldPromote, versionOf } from '../workers/deployment';

const Status = temporal.api.enums.v1.WorkerDeploymentVersionStatus;

describe('worker deployment versions (pure)', () => {
  it('promotes a version never current or ramping, and only with promote "new"', () => {
    const fresh = { status: Status.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE, everActive: false };
    assert.equal(shouldPromote('new', fresh), true);
    assert.equal(shouldPromote('manual', fresh), false, 'manual: only sterna deploy promote');
    assert.equal(shouldPromote('new', { ...fresh, everActive: true }), false, 'an old version restarting while it drains does not take the deployment back');
    assert.equal(shouldPromote('new', { status: Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING, everActive: true }), false);
    assert.equal(shouldPromote('new', { status: Status.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING, everActive: true }), false);
  });

  it('derives the build id from the bundle (the same code, the same version) unless one is given', () => {
    assert.equal(buildIdOf('code A'), buildIdOf(Buffer.from('code A')));
    assert.notEqual(buildIdOf('code A'), buildIdOf('code B'));
    assert.match(buildIdOf('code A'), /^sterna-[0-9a-f]{12}$/);
    assert.deepEqual(versionOf({ deploymentName: 'sterna', promote: 'new' }, 'code A'), { deploymentName: 'sterna', buildId: buildIdOf('code A') });
    assert.deepEqual(versionOf({ deploymentName: 'prod', buildId: '2026-12-07.1', promote: 'manual' }, 'code A'), { deploymentName: 'prod', buildId: '2026-12-07.1' });
  });
});
