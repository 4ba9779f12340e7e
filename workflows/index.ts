/**
 * The workflow bundle's entry: every workflow type the `sterna` task queue runs.
 * Start a run with `temporal workflow start --type trainingRun --task-queue sterna
 * --input-file examples/run.json`, or through `client/`. The fleet observer is started
 * on demand (activities/fleet/ensure-observer.ts), the price book when a worker that
 * keeps one starts or a run first asks for prices (activities/pricing).
 */
export { trainingRun, type ContinuedRun } from './run/training-run';
export { fleetObserver } from './fleet/observer';
export { priceBook } from './pricing-book/workflow';
export { sternaReaper } from './reaper/reaper';
export { teamLedger } from './teams/workflow';
export { zoneMemory } from './zones/zone-memory';
export { planRun } from './plan/workflow';
export { throughputMemory } from './plan/throughput-memory';
