/**
 * Random preemptions for the scale benchmark: every training spot VM is preempted at
 * `ratePerHour`, independently (a Poisson process per VM), through the emulator's admin
 * API, which plays GCE's sequence (notice, STOPPING, SIGTERM to the guest, TERMINATED).
 *
 * The fleet's total rate changes as VMs come and go, so events are drawn by thinning: at
 * the highest possible rate (every run training), each candidate event is kept with
 * probability (VMs training now / runs) and hits one of them uniformly. Exact, seeded,
 * and it asks the emulator for its instances only when a candidate event is due.
 */
import { OwnerLabel, ProvisioningModel, seededRandom } from '../../workflows/api';
import type { AdminInstanceView, EmulatorAdminClient } from '../../emulator/admin-client';

export interface InjectedPreemption {
  name: string;
  zone: string;
  /** Epoch ms at which the admin call was sent. */
  atMs: number;
}

/** A VM worth preempting: one of the benchmark's runs, spot, RUNNING, and training. */
export function preemptible(i: AdminInstanceView): boolean {
  return (
    i.status === 'RUNNING' &&
    i.provisioningModel === ProvisioningModel.Spot &&
    i.labels[OwnerLabel.Run] !== undefined &&
    !i.preempted &&
    i.guestAttributes.sterna?.phase === 'training'
  );
}

export class PreemptionInjector {
  readonly injected: InjectedPreemption[] = [];
  /** Admin calls that failed (the VM stopped in between): not preemptions. */
  missed = 0;
  private stopped = false;
  private readonly done: Promise<void>;

  constructor(
    private readonly admin: EmulatorAdminClient,
    private readonly ratePerHour: number,
    private readonly maxVms: number,
    seed: number,
  ) {
    const random = seededRandom(seed);
    this.done = ratePerHour > 0 ? this.loop(random) : Promise.resolve();
  }

  private async loop(random: () => number): Promise<void> {
    const fleetRatePerMs = (this.ratePerHour * this.maxVms) / 3_600_000;
    let nextAt = Date.now();
    while (!this.stopped) {
      nextAt += -Math.log(1 - random()) / fleetRatePerMs;
      while (!this.stopped && Date.now() < nextAt) await new Promise((r) => setTimeout(r, Math.min(500, nextAt - Date.now())));
      if (this.stopped) return;
      // Both draws are made whatever the fleet looks like, so a seed replays one sequence of choices.
      const keep = random();
      const pick = random();
      try {
        const training = (await this.admin.instances()).filter(preemptible);
        if (keep >= training.length / this.maxVms) continue;
        const vm = training[Math.floor(pick * training.length)];
        const atMs = Date.now();
        await this.admin.preempt(vm.project, vm.zone, vm.name);
        this.injected.push({ name: vm.name, zone: vm.zone, atMs });
      } catch {
        // The VM stopped in between (409), or the emulator was busy: no preemption this time.
        this.missed++;
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}
