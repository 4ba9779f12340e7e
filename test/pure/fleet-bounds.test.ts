import { strict as assert } from 'node:assert';
import { boundSettings } from '../../activities/fleet/bounds';
import { DEFAULT_FLEET_SETTINGS, type FleetSettings } from '../../workflows/fleet/contract';
import { acceptedOptions, DEFAULT_OBSERVER_OPTIONS } from '../../workflows/fleet/options';

describe('observer settings anyone may signal (pure)', () => {
  const worker: FleetSettings = { ...DEFAULT_FLEET_SETTINGS, intervalSeconds: 2 };

  it('are held to the worker\'s: never more looks, reads or signals, and the worker\'s own silence', () => {
    const greedy: FleetSettings = { intervalSeconds: 0.2, readsPerMinute: 100_000, progressReadSeconds: 0.2, busyReadSeconds: 0.2, progressSignalSeconds: 0.2, maxSilenceSeconds: 0.2, burstSeconds: 600, drainReadSeconds: 0.01 };
    assert.deepEqual(boundSettings(greedy, worker), worker);
  });

  it('may be calmer than the worker\'s', () => {
    const calm: FleetSettings = { ...worker, intervalSeconds: 30, readsPerMinute: 100, progressReadSeconds: 600, maxSilenceSeconds: 9_000 };
    assert.deepEqual(boundSettings(calm, worker), { ...calm, maxSilenceSeconds: worker.maxSilenceSeconds });
  });

  it('take the worker\'s value for anything that is not a positive number', () => {
    const junk = { intervalSeconds: Number.NaN, readsPerMinute: -1, progressReadSeconds: 'soon', busyReadSeconds: Infinity } as unknown as FleetSettings;
    assert.deepEqual(boundSettings(junk, worker), worker);
  });

  it('are taken by the observer only as a well-formed set; otherwise it keeps what it had', () => {
    const good = { settings: { ...DEFAULT_FLEET_SETTINGS, intervalSeconds: 1 }, watchSeconds: 10, idleExitSeconds: 600 };
    assert.deepEqual(acceptedOptions(good, DEFAULT_OBSERVER_OPTIONS), good);
    assert.equal(acceptedOptions({ ...good, watchSeconds: 'soon' }, DEFAULT_OBSERVER_OPTIONS), DEFAULT_OBSERVER_OPTIONS);
    assert.equal(acceptedOptions({ ...good, watchSeconds: 0 }, DEFAULT_OBSERVER_OPTIONS), DEFAULT_OBSERVER_OPTIONS);
    assert.equal(acceptedOptions({ ...good, settings: { intervalSeconds: 1 } }, DEFAULT_OBSERVER_OPTIONS), DEFAULT_OBSERVER_OPTIONS);
    assert.equal(acceptedOptions(null, DEFAULT_OBSERVER_OPTIONS), DEFAULT_OBSERVER_OPTIONS);
  });
});
