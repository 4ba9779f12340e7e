/** The spec's `setup` (issue 38): bounded, one line per command, and what reaches the agent. */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentAttributes, encodeList, parseAgentValues } from '../activities/agent/script';
import { checkSpec, MAX_SETUP_COMMAND_LENGTH, MAX_SETUP_COMMANDS, MAX_SETUP_ENCODED_BYTES, type RunSpecInput } from '../workflows/spec';
import { freshRun, provisionRequest } from '../workflows/run/requests';

const repo = join(__dirname, '..', '..');
const example = (): RunSpecInput => JSON.parse(readFileSync(join(repo, 'examples', 'run.json'), 'utf8'));

function problems(setup: unknown): { path: string; message: string }[] {
  const check = checkSpec({ ...example(), setup });
  return check.ok ? [] : check.problems;
}

describe('the spec\'s setup', () => {
  it('accepts up to its bounds, and refuses past them with what to do', () => {
    assert.deepEqual(problems(['pip install -r requirements.txt', 'python -m compileall -q .']), []);
    assert.deepEqual(problems(Array.from({ length: MAX_SETUP_COMMANDS }, (_, i) => `echo ${i}`)), []);
    const many = problems(Array.from({ length: MAX_SETUP_COMMANDS + 1 }, (_, i) => `echo ${i}`));
    assert.deepEqual(many.map((p) => p.path), ['setup']);
    assert.match(many[0].message, /at most 32 setup commands; put a longer setup in a script/);
    assert.deepEqual(problems(['x'.repeat(MAX_SETUP_COMMAND_LENGTH)]), []);
    assert.deepEqual(problems(['x'.repeat(MAX_SETUP_COMMAND_LENGTH + 1)]).map((p) => p.path), ['setup.0']);
    assert.deepEqual(problems(['echo ok', '']).map((p) => p.path), ['setup.1']);
    // Eight of 4,096 characters take 8 x 5,465 + 2 bytes as sent: more than 32 KiB.
    const big = problems(Array.from({ length: 8 }, () => 'y'.repeat(MAX_SETUP_COMMAND_LENGTH)));
    assert.deepEqual(big.map((p) => p.path), ['setup']);
    assert.match(big[0].message, new RegExp(`more than the ${MAX_SETUP_ENCODED_BYTES} allowed`));
    // One line each: a newline would be a second command the spec does not show.
    assert.deepEqual(problems(['echo a\necho b']).map((p) => p.path), ['setup.0']);
    assert.deepEqual(problems('pip install x').map((p) => p.path), ['setup']);
  });

  it('reaches the agent as sterna-setup only when given, and the image only on GCE\'s own attribute', () => {
    const { spec, state } = freshRun({ ...example(), setup: ['pip install -r requirements.txt'], image: 'python:3.12-slim' }, 'run-1', 0);
    const attempt = { attempt: 1, ref: { name: 'vm' }, offer: { zone: 'z', region: 'r', accelerator: 'nvidia-l4', acceleratorCount: 1, machineType: 'g2-standard-4', provisioningModel: 'SPOT', pricePerHour: 1 } } as never;
    const request = provisionRequest(spec, state, attempt, { run: 'r', execution: 'e', attempt: 1 }, 0);
    assert.deepEqual(request.agent.setup, ['pip install -r requirements.txt']);
    assert.equal(request.image, 'python:3.12-slim');
    const attributes = agentAttributes(request.agent);
    assert.equal(attributes['sterna-setup'], encodeList(['pip install -r requirements.txt']));
    assert.equal(attributes['sterna-image'], undefined, 'agentAttributes serves GKE too, whose pod already runs in the image');
    const plain = freshRun(example(), 'run-2', 0);
    const bare = provisionRequest(plain.spec, plain.state, attempt, { run: 'r', execution: 'e', attempt: 1 }, 0);
    assert.ok(!('setup' in bare.agent), 'a run without setup asks for exactly what it always did');
    assert.equal(agentAttributes(bare.agent)['sterna-setup'], undefined);
  });

  it('reads setup\'s progress and failure from what the agent publishes', () => {
    assert.deepEqual(parseAgentValues({ phase: 'setup', 'setup-step': '2/3' }).setupStep, { step: 2, of: 3 });
    assert.deepEqual(parseAgentValues({ phase: 'failed', exit: '71', 'setup-step': '3/3', 'setup-exit': '1' }), {
      ...parseAgentValues({ phase: 'failed', exit: '71' }),
      setupStep: { step: 3, of: 3 },
      setupExitCode: 1,
    });
    for (const bad of ['0/3', '4/3', '1', 'a/b', '1/3/4']) assert.equal(parseAgentValues({ 'setup-step': bad }).setupStep, undefined, bad);
  });
});
