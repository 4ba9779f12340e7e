/**
 * Gang runs' rules, server-less: names, node inputs, the gang's one verdict from its
 * nodes' snapshots, its release, and the run machine following a gang node by node.
 */
import { strict as assert } from 'node:assert';
import { admitted, stepOn } from '../helpers/run-harness';
import { agentAttributes } from '../../activities/agent/script';
import { internalAddress } from '../../emulator/render';
import { addGradients, dataParallelStep, gradientSum, shardOf, step, type Checkpoint } from '../../examples/trainer';
import type { ProvisionRequest } from '../../workflows/activity-contract';
import { acceptContinuation } from '../../workflows/run/continuation';
import { executionToken, isOwnedBy, resourceName, runKey } from '../../workflows/naming';
import { gangObservation, gangRef, gangRelease, gangSnapshot, gangSize, namesPartOf, nodeRefs, nodeRequest, nodeSays, rankIn } from '../../workflows/run/gang';
import type { Action as Command, Context, RunEvent } from '../../workflows/run/protocol';
import { capacityRequest } from '../../workflows/run/requests';
import { AttemptOutcome, initialState, type RunState } from '../../workflows/run/state';
import { ledger, statusOf } from '../../workflows/run/views';
import { admissionRequestOf } from '../../workflows/run/admission';
import { checkSpec, parseSpec, type RunSpec, type RunSpecInput, type SpecProblem } from '../../workflows/spec';
import type { AgentSnapshot, Offer, ResourceRef } from '../../workflows/types';

const T0 = Date.parse('2026-12-01T00:00:00Z');
const WORKFLOW = 'gang-run-7';
const EXEC = executionToken('first-run-id');
const GCE_NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

function specInput(overrides: Partial<RunSpecInput> = {}): RunSpecInput {
  return {
    command: ['node', 'trainer.js'],
    checkpoint: { uri: 'gs://ckpt/run' },
    resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }], nodes: 2 },
    pricing: { mode: 'spot' },
    recovery: { pollSeconds: 5, zoneCooldown: '1h' },
    ...overrides,
  };
}

/** A two-node offer as the GCE provider makes it: the price of both nodes. */
function gangOffer(zone: string, perNode: number): Offer {
  return { backend: 'gce', zone, region: zone.slice(0, -2), accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: 2 * perNode, onDemandPricePerHour: 1.4, quotaAvailable: true, nodes: 2 };
}

function specProblems(input: RunSpecInput): SpecProblem[] {
  const check = checkSpec(input);
  return check.ok ? [] : check.problems;
}

const running = (extra: Partial<AgentSnapshot> = {}): AgentSnapshot => ({ lifecycle: 'running', preempted: false, ...extra });

describe('gang runs (pure, no server)', () => {
  describe('names', () => {
    it('keeps a single node\'s name exactly as before gangs, and gives each node of a gang `-n<rank>` within GCE\'s rules', () => {
      assert.equal(resourceName(WORKFLOW, EXEC, 3, 1), resourceName(WORKFLOW, EXEC, 3));
      const long = `team-${'x'.repeat(120)}`;
      for (const id of [WORKFLOW, long]) {
        const gang = resourceName(id, EXEC, 12, 64);
        assert.match(gang, /-a12$/);
        const last = nodeRefs({ backend: 'gce', name: gang, zone: 'us-central1-a', nodes: 64 }).at(-1)!;
        assert.equal(last.name, `${gang}-n63`);
        assert.ok(last.name.length <= 63, last.name);
        assert.match(last.name, GCE_NAME);
      }
    });

    it('lists every node rank first as plain refs, and knows which names are the gang\'s', () => {
      const ref: ResourceRef = { backend: 'gce', name: 'st-run-a1', zone: 'us-central1-a', nodes: 3 };
      assert.deepEqual(nodeRefs(ref), [0, 1, 2].map((r) => ({ backend: 'gce', name: `st-run-a1-n${r}`, zone: 'us-central1-a' })));
      assert.equal(rankIn(ref, 'st-run-a1-n2'), 2);
      assert.equal(rankIn(ref, 'st-run-a1-n3'), undefined, 'no rank past the gang');
      assert.equal(rankIn(ref, 'st-run-a1-n01'), undefined);
      assert.equal(rankIn(ref, 'st-run-a11-n0'), undefined, 'another attempt\'s node');
      assert.ok(namesPartOf(ref, 'st-run-a1'));
      assert.deepEqual(nodeRefs({ backend: 'gce', name: 'solo', zone: 'z' }), [{ backend: 'gce', name: 'solo', zone: 'z' }]);
      assert.equal(rankIn({ backend: 'gce', name: 'solo', zone: 'z' }, 'solo'), 0);
    });
  });

  describe('node inputs', () => {
    const owner = { run: runKey(WORKFLOW), execution: EXEC, attempt: 1 };
    const request: ProvisionRequest = {
      name: 'st-gang-a1',
      offer: gangOffer('us-central1-a', 0.2),
      owner,
      labels: { team: 'ml', 'sterna-run': owner.run, 'sterna-exec': EXEC, 'sterna-attempt': '1' },
      diskSizeGb: 100,
      agent: { runId: WORKFLOW, attempt: 1, argv: ['node'], env: {}, datasets: [], checkpointUri: 'gs://ckpt/run', pollSeconds: 1 },
    };

    it('names and labels each node with its rank, keeps the owner, and tells ranks past 0 where rank 0 listens', () => {
      const lead = nodeRequest(request, 0, 2, { masterPort: 29500 });
      const other = nodeRequest(request, 1, 2, { masterAddr: '10.128.0.7', masterPort: 29500 });
      assert.equal(lead.name, 'st-gang-a1-n0');
      assert.equal(other.name, 'st-gang-a1-n1');
      assert.equal(other.labels['sterna-rank'], '1');
      assert.equal(other.labels.team, 'ml');
      assert.ok(isOwnedBy(other.labels, owner), 'a node is its attempt\'s, by the same owner labels');
      assert.deepEqual(other.agent.gang, { rank: 1, nodes: 2, masterAddr: '10.128.0.7', masterPort: 29500 });
      const attributes = agentAttributes(other.agent);
      assert.equal(attributes['sterna-node-rank'], '1');
      assert.equal(attributes['sterna-num-nodes'], '2');
      assert.equal(attributes['sterna-master-addr'], '10.128.0.7');
      assert.equal(attributes['sterna-master-port'], '29500');
      // Rank 0 reads its own address on the VM; a single node has no gang inputs at all.
      assert.equal(agentAttributes(lead.agent)['sterna-master-addr'], undefined);
      assert.equal(agentAttributes(request.agent)['sterna-num-nodes'], undefined);
    });
  });

  describe('the gang\'s verdict', () => {
    const checkpoint = { uri: 'gs://ckpt/run/step-40.json', sha256: 'a'.repeat(64), step: 40 };

    it('is rank 0\'s while the others only train', () => {
      const lead = running({ phase: 'training', step: 41, checkpoint });
      assert.deepEqual(gangSnapshot([lead, running({ phase: 'training', step: 41 })]), lead);
      assert.equal(nodeSays(1, running({ phase: 'training', step: 41 })), undefined);
      assert.equal(nodeSays(1, running({ phase: 'exited', exitCode: 0 })), undefined, 'a rank past 0 finishing says nothing: rank 0 completes the gang');
    });

    it('is lost (preempted) when any node stops or vanishes, keeping rank 0\'s checkpoint', () => {
      const lead = running({ phase: 'training', step: 41, checkpoint });
      const gang = gangSnapshot([lead, running(), { lifecycle: 'terminated', preempted: true }]);
      assert.equal(gang.lifecycle, 'terminated');
      assert.equal(gang.preempted, true);
      assert.deepEqual(gang.checkpoint, checkpoint);
      assert.equal(gangSnapshot([lead, { lifecycle: 'gone', preempted: false }]).lifecycle, 'gone');
    });

    it('drains on any node\'s preemption notice, and fails with a failed node\'s exit code', () => {
      const lead = running({ phase: 'training', step: 41 });
      assert.equal(gangSnapshot([lead, { lifecycle: 'stopping', preempted: true }]).preempted, true);
      const failed = gangSnapshot([lead, running({ phase: 'exited', exitCode: 3 })]);
      assert.equal(failed.phase, 'exited');
      assert.equal(failed.exitCode, 3);
    });

    it('is complete once rank 0 exited 0, whatever the others do next', () => {
      const lead = running({ phase: 'exited', exitCode: 0, checkpoint });
      assert.deepEqual(gangSnapshot([lead, { lifecycle: 'terminated', preempted: true }]), lead);
    });

    it('reads a node\'s observation as the gang\'s, named as the attempt, and ignores other resources', () => {
      const live: ResourceRef = { backend: 'gce', name: 'st-run-a2', zone: 'z', nodes: 2 };
      const owner = { run: 'r', execution: 'e', attempt: 2 };
      const at = new Date(T0).toISOString();
      const lost = gangObservation(live, { name: 'st-run-a2-n1', owner, at, snapshot: { lifecycle: 'terminated', preempted: true } });
      assert.equal(lost?.name, 'st-run-a2');
      assert.equal(gangObservation(live, { name: 'st-run-a2-n1', owner, at, snapshot: running({ step: 3 }) }), undefined);
      assert.equal(gangObservation(live, { name: 'st-run-a1-n1', owner, at, snapshot: running() }), undefined);
      const whole = { name: 'st-run-a2', owner, at, snapshot: running({ step: 9 }) };
      assert.equal(gangObservation(live, whole), whole, 'the run\'s own look sees the gang whole');
    });
  });

  describe('release', () => {
    it('is deleted if any node was, and lasts the nodes\' mean running time from the first start, so the gang\'s price over it is their billing', () => {
      const result = gangRelease([
        { outcome: 'deleted', startedAt: '2026-12-01T00:00:05.000Z', stoppedAt: '2026-12-01T01:00:05.000Z' },
        { outcome: 'absent' },
        { outcome: 'deleted', startedAt: '2026-12-01T00:00:02.000Z', stoppedAt: '2026-12-01T00:30:02.000Z' },
      ]);
      // 3600 s + 0 + 1800 s over three nodes: 1800 s at three nodes' price.
      assert.deepEqual(result, { outcome: 'deleted', startedAt: '2026-12-01T00:00:02.000Z', stoppedAt: '2026-12-01T00:30:02.000Z' });
      assert.equal(gangRelease([{ outcome: 'absent' }, { outcome: 'absent' }]).outcome, 'absent');
      assert.equal(gangRelease([{ outcome: 'absent' }, { outcome: 'not-ours' }]).outcome, 'not-ours');
    });
  });

  describe('spec', () => {
    it('runs gangs on GCE and GKE, on whole GPUs, and on GCE without flex-start (GKE asks for all N in one request)', () => {
      assert.equal(parseSpec(specInput()).resources.nodes, 2);
      assert.equal(parseSpec(specInput({ resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] } })).resources.nodes, 1);
      assert.equal(parseSpec(specInput({ backend: 'gke' })).resources.nodes, 2);
      assert.equal(parseSpec(specInput({ backend: 'gke', pricing: { mode: 'flex-start' } })).resources.nodes, 2);
      const flex = specProblems(specInput({ pricing: { mode: 'flex-start' } }));
      assert.ok(flex.some((p) => p.path === 'resources.nodes' && /flex-start/.test(p.message)), JSON.stringify(flex));
    });

    it('asks for offers for every node, and for every node\'s GPUs from its team', () => {
      const spec = parseSpec(specInput());
      assert.equal(capacityRequest(spec).request.nodes, 2);
      assert.equal(capacityRequest(parseSpec(specInput({ resources: { accelerators: [{ type: 'nvidia-l4', count: 1 }] } }))).request.nodes, undefined);
      const state = initialState(WORKFLOW, T0, undefined, undefined);
      assert.equal(admissionRequestOf(spec, state).gpus, 2);
    });
  });

  describe('the run machine, following a gang', () => {
    class Gang {
      readonly spec: RunSpec = parseSpec(specInput());
      state: RunState = admitted(initialState(WORKFLOW, T0, undefined, undefined));
      now = T0;
      context(): Context {
        return { nowMs: this.now, workflowId: WORKFLOW, execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 };
      }
      send(event: RunEvent): Command {
        return stepOn(this, this.spec, event, this.context());
      }
      node(attempt: number, rank: number, snapshot: AgentSnapshot): Command {
        const name = `${resourceName(WORKFLOW, EXEC, attempt, 2)}-n${rank}`;
        return this.send({ kind: 'observed', via: 'observer', observation: { name, owner: { run: runKey(WORKFLOW), execution: EXEC, attempt }, at: new Date(this.now).toISOString(), snapshot } });
      }
    }

    it('provisions a gang attempt, hears rank 0\'s progress, and releases the whole gang when another rank is lost', () => {
      const run = new Gang();
      assert.deepEqual(run.send({ kind: 'start' }), { kind: 'find-capacity' });
      assert.deepEqual(run.send({ kind: 'offers', offers: [gangOffer('us-central1-a', 0.2), gangOffer('us-east1-b', 0.25)] }), { kind: 'provision', attempt: 1 });
      const attempt = run.state.attempts[0];
      assert.deepEqual(attempt.ref, { backend: 'gce', name: resourceName(WORKFLOW, EXEC, 1, 2), zone: 'us-central1-a', nodes: 2 });
      run.send({ kind: 'provisioned', attempt: 1, startedAt: new Date(T0).toISOString(), adopted: false, observerAsked: true });
      const checkpoint = { uri: 'gs://ckpt/run/step-40.json', sha256: 'b'.repeat(64), step: 40 };
      run.now += 5_000;
      run.node(1, 0, running({ phase: 'training', step: 42, checkpoint }));
      run.node(1, 1, running({ phase: 'training', step: 7 }));
      assert.equal(run.state.step, 42, 'rank 0 speaks for the gang\'s progress');
      assert.equal(run.state.lastCheckpoint?.step, 40);
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Running);
      const status = statusOf(run.state, run.now, run.spec);
      assert.deepEqual(status.nodes?.map((n) => n.name), [0, 1].map((r) => `${attempt.ref.name}-n${r}`));
      run.now += 5_000;
      const command = run.node(1, 1, { lifecycle: 'terminated', preempted: true });
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Preempted);
      assert.deepEqual(command, { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.equal(run.state.zoneEvents.at(-1)?.zone, 'us-central1-a', 'the zone is remembered as for a single node');
      // Released, the run places again from rank 0's checkpoint, in another zone.
      assert.deepEqual(run.send({ kind: 'released', attempt: 1, outcome: 'deleted', stoppedAt: new Date(run.now).toISOString() }), { kind: 'find-capacity' });
      assert.deepEqual(run.send({ kind: 'offers', offers: [gangOffer('us-central1-a', 0.2), gangOffer('us-east1-b', 0.25)] }), { kind: 'provision', attempt: 2 });
      assert.equal(run.state.attempts[1].offer.zone, 'us-east1-b');
      assert.equal(run.state.attempts[1].resumedFromStep, 40);
      // The ledger bills the gang's price: both nodes.
      const line = ledger(run.state, run.now).lines[0];
      assert.equal(line.nodes, 2);
      assert.ok(Math.abs(line.costUsd - (0.4 * 10) / 3600) < 1e-12, String(line.costUsd));
    });

    it('carries a gang attempt through continue-as-new, and refuses one whose node count was changed', () => {
      const run = new Gang();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: [gangOffer('us-central1-a', 0.2)] });
      const continued = () => ({ continued: true as const, spec: run.spec, state: JSON.parse(JSON.stringify(run.state)) as RunState });
      const execution = { workflowId: WORKFLOW, execution: EXEC, continuedFromExecutionRunId: 'previous-run', attempt: 1 };
      assert.deepEqual(acceptContinuation(continued(), execution).state.attempts[0].ref, run.state.attempts[0].ref);
      const forged = continued();
      forged.state.attempts[0].ref.nodes = 3;
      assert.throws(() => acceptContinuation(forged, execution), /ref\.nodes/);
      // A GKE gang is one Job: its ref names the Job alone.
      assert.equal(gangRef({ backend: 'gke', name: 'job', zone: 'z' }, { ...gangOffer('z', 0.2), backend: 'gke' }).nodes, undefined);
    });

    it('treats a stockout of any node like a single node\'s: the zone is recorded and the gang released before the next offer', () => {
      const run = new Gang();
      run.send({ kind: 'start' });
      run.send({ kind: 'offers', offers: [gangOffer('us-central1-a', 0.2), gangOffer('us-east1-b', 0.25)] });
      const command = run.send({ kind: 'provision-failed', attempt: 1, failure: 'Stockout', message: 'no capacity in us-central1-a' });
      assert.deepEqual(command, { kind: 'release', attempt: 1, createMayBeInFlight: false, beside: true });
      assert.equal(run.state.attempts[0].outcome, AttemptOutcome.Stockout);
      assert.equal(run.state.zoneEvents[0].kind, 'stockout');
      assert.deepEqual(run.send({ kind: 'released', attempt: 1, outcome: 'deleted' }), { kind: 'provision', attempt: 2 });
      assert.equal(gangSize(run.state.attempts[1].ref), 2);
    });
  });

  describe('the emulator\'s internal addresses', () => {
    it('gives each VM a loopback address of its own, which its peers on this machine can reach', () => {
      const ids = ['1234567890123456789', '1234567890123456790', '9007199254740993123', '42'];
      const addresses = ids.map(internalAddress);
      for (const a of addresses) {
        const octets = a.split('.').map(Number);
        assert.equal(octets[0], 127, a);
        assert.ok(octets[1] >= 64 && octets[1] <= 191 && octets.slice(2).every((o) => o >= 1 && o <= 254), a);
      }
      assert.equal(new Set(addresses).size, ids.length);
    });
  });

  describe('the example trainer\'s data-parallel arithmetic', () => {
    const rows = { x: [[1, 0.5], [0.2, -1], [-0.3, 0.8], [0.9, 0.1], [-1, -0.4]], y: [1, 0, 1, 1, 0] };
    const start: Checkpoint = { step: 0, weights: [0, 0], bias: 0, loss: NaN };

    it('shards rows by rank and averages every shard\'s gradient over all rows', () => {
      const shards = [0, 1].map((r) => shardOf(rows, r, 2));
      assert.deepEqual(shards[1].y, [0, 1]);
      const gang = dataParallelStep(start, shards, 0.1);
      const whole = step(start, rows.x, rows.y, 0.1);
      gang.weights.forEach((w, j) => assert.ok(Math.abs(w - whole.weights[j]) < 1e-15, 'the same step as on one node, up to rounding'));
      const alone = step(start, shards[0].x, shards[0].y, 0.1);
      assert.notDeepEqual(gang.weights, alone.weights, 'rank 1\'s rows count');
      const sum = addGradients([gradientSum(start, shards[0].x, shards[0].y), gradientSum(start, shards[1].x, shards[1].y)]);
      assert.equal(sum.rows, 5);
    });
  });
});
