/**
 * Where spot capacity exists and when spot VMs are preempted.
 *
 * - calm (the default): spot capacity everywhere, no preemption but the ones asked for
 *   through the admin API, so tests and the demo are deterministic.
 * - random: a seeded two-state Markov chain per zone (spot capacity up for an
 *   exponentially distributed time with mean `meanUpHours`, then down for
 *   `meanDownHours`; going down preempts the zone's spot VMs), plus independent
 *   preemptions of each running spot VM at `preemptionsPerHour`. Emulated hours.
 * - trace: a replayed availability trace (trace.ts). At each tick, a zone whose bit is
 *   0 has no spot capacity for the trace's accelerator and its running spot VMs of
 *   that accelerator are preempted; spot prices follow the trace tick by tick.
 */
import type { Clock } from './clock';
import { availableAt, spotPriceAt, tickAt, type Trace, type TraceEntry } from './trace';
import type { EmulatorState, GpuRequest, InstanceRecord } from './types';
import { seededRandom } from '../workflows/api';

export interface SpotModelHooks {
  /** Running (or booting) spot VMs. */
  liveSpotInstances(): InstanceRecord[];
  preempt(instance: InstanceRecord, why: string): void;
  /** Spot prices may have changed: re-price the running spot VMs. */
  repriced(): void;
  persist(): void;
}

export interface SpotModel {
  readonly kind: 'calm' | 'random' | 'trace';
  spotAvailable(zone: string, gpus: GpuRequest | undefined): boolean;
  /** The model's spot price for this shape in this zone now (trace replay), else undefined (catalog price). */
  spotPrice(zone: string, gpus: GpuRequest | undefined): number | undefined;
  start(hooks: SpotModelHooks): void;
  stop(): void;
  describe(): Record<string, unknown>;
}

export interface RandomSpotOptions {
  seed: number;
  /** Mean emulated hours a zone keeps spot capacity; Infinity = forever. */
  meanUpHours: number;
  /** Mean emulated hours a zone stays without spot capacity. */
  meanDownHours: number;
  /** Per running spot VM, emulated preemptions per hour while its zone has capacity. */
  preemptionsPerHour: number;
  /** Emulated seconds between model steps. */
  stepSeconds?: number;
}

/** Emulated seconds between random-model steps: one minute is fine-grained against hour-scale means. */
const DEFAULT_STEP_SECONDS = 60;
/** Real milliseconds below which timers are not worth arming (a very large time factor). */
const MIN_TIMER_MS = 20;

export class CalmSpotModel implements SpotModel {
  readonly kind = 'calm';
  spotAvailable(): boolean {
    return true;
  }
  spotPrice(): undefined {
    return undefined;
  }
  start(): void {}
  stop(): void {}
  describe(): Record<string, unknown> {
    return { kind: this.kind };
  }
}

export class RandomSpotModel implements SpotModel {
  readonly kind = 'random';
  private timer?: NodeJS.Timeout;
  private readonly random: () => number;
  private readonly stepSeconds: number;

  constructor(
    private readonly options: RandomSpotOptions,
    private readonly state: EmulatorState,
    private readonly clock: Clock,
    private readonly zones: string[],
  ) {
    this.random = seededRandom(options.seed);
    this.stepSeconds = options.stepSeconds ?? DEFAULT_STEP_SECONDS;
  }

  spotAvailable(zone: string): boolean {
    return !this.state.spotDownZones.includes(zone);
  }

  spotPrice(): undefined {
    return undefined;
  }

  start(hooks: SpotModelHooks): void {
    const { meanUpHours, preemptionsPerHour } = this.options;
    const changes = Number.isFinite(meanUpHours) || this.state.spotDownZones.length > 0 || preemptionsPerHour > 0;
    if (!changes) return;
    const interval = Math.max(MIN_TIMER_MS, this.clock.realMs(this.stepSeconds));
    this.timer = setInterval(() => this.step(hooks), interval);
    this.timer.unref();
  }

  private step(hooks: SpotModelHooks): void {
    const { meanUpHours, meanDownHours, preemptionsPerHour } = this.options;
    const dtHours = this.stepSeconds / 3600;
    const down = new Set(this.state.spotDownZones);
    let changed = false;
    for (const zone of this.zones) {
      if (down.has(zone)) {
        if (this.random() < 1 - Math.exp(-dtHours / Math.max(meanDownHours, 1e-9))) {
          down.delete(zone);
          changed = true;
        }
      } else if (Number.isFinite(meanUpHours) && this.random() < 1 - Math.exp(-dtHours / Math.max(meanUpHours, 1e-9))) {
        down.add(zone);
        changed = true;
      }
    }
    if (changed) {
      this.state.spotDownZones = [...down].sort();
      hooks.persist();
    }
    const pPreempt = 1 - Math.exp(-preemptionsPerHour * dtHours);
    for (const i of hooks.liveSpotInstances()) {
      if (down.has(i.zone)) hooks.preempt(i, `zone ${i.zone} lost its spot capacity (random model)`);
      else if (pPreempt > 0 && this.random() < pPreempt) hooks.preempt(i, 'random preemption');
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  describe(): Record<string, unknown> {
    return { kind: this.kind, ...this.options, stepSeconds: this.stepSeconds, zonesWithoutSpot: this.state.spotDownZones };
  }
}

export class TraceSpotModel implements SpotModel {
  readonly kind = 'trace';
  private timer?: NodeJS.Timeout;
  private lastTick = -1;

  constructor(
    readonly trace: Trace,
    private readonly state: EmulatorState,
    private readonly clock: Clock,
    /** Tick at emulated time 0, to start a replay somewhere other than the beginning. */
    private readonly startTick = 0,
  ) {}

  private elapsedSeconds(): number {
    return this.clock.emulatedSeconds(this.clock.now() - this.state.epochMs) + this.startTick * this.trace.gapSeconds;
  }

  tick(): number {
    return tickAt(this.trace, this.elapsedSeconds());
  }

  private entryFor(zone: string, gpus: GpuRequest | undefined): TraceEntry | undefined {
    if (!gpus) return undefined;
    const candidates = this.trace.entries.filter((e) => e.zone === zone && e.accelerator === gpus.type);
    return candidates.find((e) => e.acceleratorCount === gpus.count) ?? candidates.find((e) => e.acceleratorCount === 1) ?? candidates[0];
  }

  spotAvailable(zone: string, gpus: GpuRequest | undefined): boolean {
    const entry = this.entryFor(zone, gpus);
    return !entry || availableAt(entry, this.tick());
  }

  spotPrice(zone: string, gpus: GpuRequest | undefined): number | undefined {
    const entry = this.entryFor(zone, gpus);
    return entry && entry.acceleratorCount === gpus?.count ? spotPriceAt(entry, this.tick()) : undefined;
  }

  start(hooks: SpotModelHooks): void {
    const run = () => {
      const tick = this.tick();
      if (tick !== this.lastTick) {
        this.lastTick = tick;
        for (const i of hooks.liveSpotInstances()) {
          if (!this.spotAvailable(i.zone, i.gpus)) hooks.preempt(i, `trace ${this.trace.name}: no spot capacity in ${i.zone} at tick ${tick}`);
        }
        hooks.repriced();
      }
      const elapsed = this.elapsedSeconds();
      const nextBoundary = (Math.floor(elapsed / this.trace.gapSeconds) + 1) * this.trace.gapSeconds;
      this.timer = setTimeout(run, Math.max(MIN_TIMER_MS, this.clock.realMs(nextBoundary - elapsed)));
      this.timer.unref();
    };
    run();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
  }

  describe(): Record<string, unknown> {
    const tick = this.tick();
    return {
      kind: this.kind,
      trace: this.trace.name,
      gapSeconds: this.trace.gapSeconds,
      ticks: this.trace.ticks,
      tick,
      zones: this.trace.entries.map((e) => ({ zone: e.zone, sourceZone: e.sourceZone, accelerator: e.accelerator, acceleratorCount: e.acceleratorCount, machineType: e.machineType, available: availableAt(e, tick), spotPrice: spotPriceAt(e, tick), onDemandPrice: e.onDemandPrice })),
    };
  }
}
