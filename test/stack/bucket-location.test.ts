/**
 * A dataset's location from its bucket, through the storage API: which buckets a run
 * asks about, placement weighing the answer (or saying on the timeline why it cannot),
 * and the real client (google-auth-library's request) against the emulator's GCS
 * `buckets.get`, its errors in GCS's shape, and the worker's cache.
 */
import { strict as assert } from 'node:assert';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BucketLocator, createStorageActivities } from '../../activities/storage';
import { dataCost } from '../../workflows/data-cost';
import type { BucketAnswer } from '../../workflows/activity-contract';
import { bucketsToLocate, dataPlaces } from '../../workflows/run/data-placement';
import type { RunSpecInput } from '../../workflows/spec';
import { statusQuery } from '../../workflows/messages';
import { startTestEmulator, type TestEmulator } from '../helpers/emulator';
import { offerIn, RunHarness, specOf } from '../helpers/run-harness';
import { exampleSpec, startStack, type Stack } from '../helpers/stack';

/** The data sits in a Singapore bucket; us-central1 is 4 cents an hour cheaper. */
const OFFERS = [offerIn('us-central1-a', 0.2), offerIn('asia-southeast1-b', 0.24)];

class Run extends RunHarness {
  constructor(datasets: RunSpecInput['datasets']) {
    super('run-bucket', specOf({ time: { expectedDuration: '10h' }, datasets }));
  }

  /** The zone the machine provisions first, with the storage API's answers. */
  placed(answers: BucketAnswer[]): string {
    this.send({ kind: 'start' });
    this.send({ kind: 'offers', offers: OFFERS, bucketLocations: answers });
    return this.state.attempts[this.provisionedAttempt() - 1].offer.zone;
  }
}

describe('bucket locations from the storage API (pure, no server)', () => {
  it('asks once per bucket, only for gs:// datasets whose spec states no location', () => {
    const run = new Run([
      { uri: 'gs://data-sg/train', path: 'a' },
      { uri: 'gs://data-sg/eval', path: 'b' },
      { uri: 'gs://stated/x', path: 'c', location: 'EU' },
      { uri: 'gs://other/y', path: 'e' },
    ]);
    assert.deepEqual(bucketsToLocate(run.spec, run.state), ['data-sg', 'other']);
    run.placed([{ bucket: 'data-sg', location: 'ASIA-SOUTHEAST1' }, { bucket: 'other', problem: 'no bucket gs://other' }]);
    assert.deepEqual(bucketsToLocate(run.spec, run.state), [], 'answered, even where the answer is a problem');
  });

  it("places the run by the bucket's location as the API gives it (upper case)", () => {
    const run = new Run([{ uri: 'gs://data-sg/train', path: 'data', sizeGb: 500 }]);
    assert.equal(run.placed([{ bucket: 'data-sg', location: 'ASIA-SOUTHEAST1' }]), 'asia-southeast1-b');
    assert.deepEqual(dataPlaces(run.spec, run.state), [{ location: 'ASIA-SOUTHEAST1', bytes: 500e9 }]);
    assert.equal(dataCost(dataPlaces(run.spec, run.state), 'asia-southeast1', 0.24).egressUsd, 0, "the bucket's own region");
    const said = run.state.timeline.filter((e) => e.kind === 'data-location').map((e) => e.event);
    assert.deepEqual(said, ['data: gs://data-sg is in ASIA-SOUTHEAST1 (storage API); placement weighs moving it']);
  });

  it('places by price alone when the location is unknown, and says why on the timeline', () => {
    const run = new Run([{ uri: 'gs://data-sg/train', path: 'data', sizeGb: 500 }]);
    const problem = "no permission to read the metadata of gs://data-sg (storage.buckets.get); grant the worker's service account roles/storage.legacyBucketReader on it";
    assert.equal(run.placed([{ bucket: 'data-sg', problem }]), 'us-central1-a');
    assert.deepEqual(dataPlaces(run.spec, run.state), []);
    const said = run.state.timeline.filter((e) => e.kind === 'data-location').map((e) => e.event);
    assert.deepEqual(said, [`data: location of gs://data-sg unknown (${problem}); placement does not weigh moving it — state datasets[].location in the spec to have it weighed`]);
  });

  it('counts a predefined dual-region as local to both its regions', () => {
    assert.equal(dataCost([{ location: 'NAM4', bytes: 100e9 }], 'us-east1', 1).egressUsd, 0);
    assert.ok(dataCost([{ location: 'NAM4', bytes: 100e9 }], 'us-west1', 1).egressUsd > 0);
  });
});

describe('bucket locations through the storage API (emulator)', function () {
  this.timeout(60_000);
  let emulator: TestEmulator;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sterna-buckets-'));
    mkdirSync(join(dir, 'local-data'), { recursive: true });
    emulator = await startTestEmulator({ bucketsDir: dir, buckets: { 'data-sg': { location: 'ASIA-SOUTHEAST1' } } });
  });
  after(async () => {
    await emulator?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads a bucket's location: declared, or GCS's default for a local bucket", async () => {
    const locator = BucketLocator.forEmulator(emulator.endpoint);
    assert.deepEqual(await locator.locate('data-sg'), { bucket: 'data-sg', location: 'ASIA-SOUTHEAST1' });
    assert.deepEqual(await locator.locate('local-data'), { bucket: 'local-data', location: 'US' });
    await emulator.admin.setBucket('eu-data', { location: 'europe-west4' });
    assert.deepEqual(await locator.locate('eu-data'), { bucket: 'eu-data', location: 'EUROPE-WEST4' });
  });

  it("serves buckets.get in GCS's shape, and a missing bucket as GCS's 404", async () => {
    const bucket = (await (await fetch(`${emulator.endpoint}/storage/v1/b/data-sg?fields=location`)).json()) as Record<string, unknown>;
    assert.deepEqual([bucket.kind, bucket.name, bucket.location, bucket.locationType], ['storage#bucket', 'data-sg', 'ASIA-SOUTHEAST1', 'region']);
    const missing = await fetch(`${emulator.endpoint}/storage/v1/b/no-such-bucket`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), {
      error: { code: 404, message: 'The specified bucket does not exist.', errors: [{ message: 'The specified bucket does not exist.', domain: 'global', reason: 'notFound' }] },
    });
  });

  it('turns no such bucket and no permission into clear problems, never an error', async () => {
    await emulator.admin.setBucket('locked', { forbidden: true });
    const activities = createStorageActivities(BucketLocator.forEmulator(emulator.endpoint));
    const answers = await activities.locateBuckets({ buckets: ['no-such-bucket', 'locked'] });
    assert.deepEqual(answers.map((a) => a.location), [undefined, undefined]);
    assert.match(answers[0].problem!, /^no bucket gs:\/\/no-such-bucket \(the storage API: The specified bucket does not exist\.\)$/);
    assert.match(answers[1].problem!, /^no permission to read the metadata of gs:\/\/locked \(storage\.buckets\.get; the storage API: .*storage\.buckets\.get.*\); grant the worker's service account roles\/storage\.legacyBucketReader on it$/);
    const unreachable = await BucketLocator.forEmulator('http://127.0.0.1:9').locate('data-sg');
    assert.match(unreachable.problem!, /^the storage API did not answer for gs:\/\/data-sg \(/);
    const none = await createStorageActivities(undefined).locateBuckets({ buckets: ['data-sg'] });
    assert.match(none[0].problem!, /^this worker reads no bucket locations/);
  });

  it('keeps each location for the worker (a location never changes), and asks again about a problem later', async () => {
    const locator = BucketLocator.forEmulator(emulator.endpoint);
    await emulator.admin.setBucket('moving', { location: 'US-CENTRAL1' });
    assert.equal((await locator.locate('moving')).location, 'US-CENTRAL1');
    await emulator.admin.setBucket('moving', { location: 'ASIA-SOUTHEAST1' });
    assert.equal((await locator.locate('moving')).location, 'US-CENTRAL1', 'answered from the cache');
    assert.equal((await BucketLocator.forEmulator(emulator.endpoint).locate('moving')).location, 'ASIA-SOUTHEAST1', 'a fresh worker asks');
  });
});

describe('a run placed by its bucket\'s location from the storage API (real stack)', function () {
  this.timeout(240_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ timeFactor: 10 });
    await stack.startWorker();
  });
  after(async () => stack?.stop());

  it("goes to the bucket's region over a cheaper zone elsewhere; an unreadable bucket leaves placement to price, and says so", async () => {
    // The example's data, in a Singapore bucket and in one the worker may not read.
    await stack.emulator.admin.setBucket('sterna-examples', { location: 'ASIA-SOUTHEAST1' });
    cpSync(join(stack.bucketsDir, 'sterna-examples'), join(stack.bucketsDir, 'locked-examples'), { recursive: true });
    await stack.emulator.admin.setBucket('locked-examples', { forbidden: true });
    const sized = (bucket: string) => exampleSpec().datasets!.map((d) => ({ ...d, uri: d.uri.replace('gs://sterna-examples/', `gs://${bucket}/`), sizeGb: 50 }));
    const placement = { regions: { allow: ['us-central1', 'asia-southeast1'] } };
    const [near, blind] = await Promise.all([
      stack.start(exampleSpec({ datasets: sized('sterna-examples'), placement })),
      stack.start(exampleSpec({ datasets: sized('locked-examples'), placement })),
    ]);
    const [nearResult, blindResult] = await Promise.all([near.result(), blind.result()]);
    assert.deepEqual([nearResult.attempts.map((a) => a.outcome), blindResult.attempts.map((a) => a.outcome)], [['completed'], ['completed']]);
    assert.equal(nearResult.attempts[0].zone.slice(0, -2), 'asia-southeast1', "the data's region: 100 GB to move outweighs a 23% cheaper GPU");
    assert.equal(blindResult.attempts[0].zone.slice(0, -2), 'us-central1', 'location unknown: the cheaper zone');
    const said = async (run: typeof near) => (await run.query(statusQuery)).timeline.filter((e) => e.kind === 'data-location').map((e) => e.event);
    assert.deepEqual(await said(near), ['data: gs://sterna-examples is in ASIA-SOUTHEAST1 (storage API); placement weighs moving it']);
    const [unknown] = await said(blind);
    assert.match(unknown, /^data: location of gs:\/\/locked-examples unknown \(no permission to read the metadata of gs:\/\/locked-examples /);
  });
});
