/**
 * The run's state has one writer, the reducer (workflows/run/machine.ts and the phases it
 * calls), server-less: read from the code itself with the TypeScript checker, and proved
 * on the reducer's own output.
 *
 * - No module of the shell (every workflows/ module that talks to Temporal: it imports
 *   @temporalio/workflow) and no module outside workflows/run/ writes to an object of a
 *   state type (one declared in workflows/run/state.ts): no assignment, no ++/--, no
 *   delete, no in-place array method.
 * - A step returns a new, frozen state and leaves the one it was given as it was.
 */
import { strict as assert } from 'node:assert';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { step } from '../../workflows/run/machine';
import { initialState } from '../../workflows/run/state';
import { admitted, EXEC, offerIn, specOf, T0 } from '../helpers/run-harness';

const ROOT = resolve(__dirname, '..', '..', '..');
const STATE_MODULE = join(ROOT, 'workflows', 'run', 'state.ts');
const MUTATING_METHODS = new Set(['push', 'pop', 'shift', 'unshift', 'splice', 'sort', 'reverse', 'fill', 'copyWithin']);

/** `file:line  text` of every write to a state object in the files `mayWrite` refuses. */
function stateWrites(mayWrite: (file: string, source: ts.SourceFile) => boolean): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined })!;
  const program = ts.createProgram(config.fileNames.filter((f) => f.includes(`${ROOT}/workflows/`)), config.options);
  const checker = program.getTypeChecker();
  const isStateType = (type: ts.Type): boolean => {
    const t = checker.getNonNullableType(type);
    if (t.isUnion()) return t.types.some(isStateType);
    const symbol = t.getSymbol() ?? t.aliasSymbol;
    return symbol?.declarations?.some((d) => resolve(d.getSourceFile().fileName) === STATE_MODULE) ?? false;
  };
  /** The object a write lands in: `x` of `x.y = …`, `x[i] = …`, and of `x.list.push(…)`. */
  const ownerOf = (target: ts.Expression): ts.Expression | undefined => (ts.isPropertyAccessExpression(target) || ts.isElementAccessExpression(target) ? target.expression : undefined);
  const found: string[] = [];
  for (const source of program.getSourceFiles()) {
    const file = resolve(source.fileName);
    if (!file.startsWith(join(ROOT, 'workflows')) || mayWrite(file, source)) continue;
    const report = (node: ts.Node) => found.push(`${relative(ROOT, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}  ${node.getText().slice(0, 80)}`);
    const writesState = (target: ts.Expression) => {
      const owner = ownerOf(target);
      return owner !== undefined && isStateType(checker.getTypeAtLocation(owner));
    };
    const visit = (node: ts.Node): void => {
      if (ts.isBinaryExpression(node) && node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment && node.operatorToken.kind <= ts.SyntaxKind.LastAssignment && writesState(node.left)) report(node);
      if ((ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) && (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken) && writesState(node.operand)) report(node);
      if (ts.isDeleteExpression(node) && writesState(node.expression)) report(node);
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && MUTATING_METHODS.has(node.expression.name.text) && writesState(node.expression.expression)) report(node);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** The shell talks to Temporal; the reducer never does. */
function isShell(source: ts.SourceFile): boolean {
  return source.statements.some((s) => ts.isImportDeclaration(s) && ts.isStringLiteral(s.moduleSpecifier) && s.moduleSpecifier.text === '@temporalio/workflow');
}

describe('the run state\'s one writer (server-less)', () => {
  it('no shell module and no module outside workflows/run/ writes to the run\'s state', function () {
    this.timeout(120_000);
    const runDir = join(ROOT, 'workflows', 'run');
    const writes = stateWrites((file, source) => dirname(file) === runDir && !isShell(source));
    assert.deepEqual(writes, []);
  });

  it('the check sees a write where there is one', function () {
    this.timeout(120_000);
    // The reducer's own phases do write (to the step's draft): the check must find them.
    const writes = stateWrites((file) => !file.endsWith(join('run', 'ending.ts')));
    assert.ok(writes.some((w) => w.includes('attempt.released = true')), writes.join('\n'));
  });

  it('a step returns a new, frozen state and leaves the state it was given as it was', () => {
    const spec = specOf();
    const before = admitted(initialState('run-7', T0, undefined, undefined));
    const copy = structuredClone(before);
    const context = { nowMs: T0, workflowId: 'run-7', execution: EXEC, continueAsNewSuggested: false, attemptsAtStart: 0 };
    const first = step(before, spec, { kind: 'start' }, context);
    const second = step(first.state, spec, { kind: 'offers', offers: [offerIn('us-central1-a', 0.2)] }, context);
    assert.deepEqual(before, copy, 'the input is untouched');
    assert.notEqual(second.state, first.state);
    assert.equal(first.state.attempts.length, 0, 'an earlier state stays as it was');
    assert.equal(second.state.attempts.length, 1);
    assert.ok(Object.isFrozen(second.state) && Object.isFrozen(second.state.attempts[0]) && Object.isFrozen(second.state.attempts[0].offer));
    assert.throws(() => {
      (second.state as { phase: string }).phase = 'completed';
    }, TypeError);
  });
});
