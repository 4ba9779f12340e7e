/**
 * The Temporal checks before a run: the server answers for the namespace, and every search
 * attribute Sterna upserts (workflows/search-attributes.ts) is registered there with its
 * type. A run upserting an unregistered attribute fails its workflow task again and again
 * and never gets anywhere; this says so, with the command that registers them.
 *
 * One call, the operator service's ListSearchAttributes, which a client's Connection and a
 * worker's NativeConnection both carry.
 */
import { temporal } from '@temporalio/proto';
import { CLI_TYPE_NAMES, type Finding, searchAttributeCreateCommands, sternaSearchAttributes } from '../../workflows/api';

type OperatorService = temporal.api.operatorservice.v1.OperatorService;
const IndexedValueType = temporal.api.enums.v1.IndexedValueType;

export interface TemporalTarget {
  operatorService: Pick<OperatorService, 'listSearchAttributes'>;
  namespace: string;
  /** host:port, for messages. */
  address?: string;
}

/** `connect` opens the connection; its failure is a finding, as the server's answers are. */
export async function checkTemporal(connect: () => Promise<TemporalTarget>, addressForMessages?: string): Promise<Finding[]> {
  let target: TemporalTarget;
  try {
    target = await connect();
  } catch (err) {
    return [unreachable(addressForMessages, err)];
  }
  const { namespace } = target;
  let registered: Record<string, number | string>;
  try {
    registered = (await target.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
  } catch (err) {
    const e = err as { code?: number; details?: string; message?: string };
    if (e?.code === 5) {
      return [{ check: `temporal:namespace:${namespace}`, ok: false, problem: `the Temporal server has no namespace ${namespace} (${e.details ?? e.message})`, fix: `\`temporal operator namespace create --namespace ${namespace}\`, or set TEMPORAL_NAMESPACE to an existing one` }];
    }
    return [unreachable(target.address ?? addressForMessages, err)];
  }
  const findings: Finding[] = [{ check: `temporal:namespace:${namespace}`, ok: true }];
  const missing = sternaSearchAttributes.filter((key) => registered[key.name] === undefined);
  const mistyped = sternaSearchAttributes.filter((key) => registered[key.name] !== undefined && typeName(registered[key.name]) !== key.type);
  const check = `temporal:search-attributes:${namespace}`;
  if (missing.length === 0 && mistyped.length === 0) {
    findings.push({ check, ok: true });
    return findings;
  }
  const problems: string[] = [];
  const fixes: string[] = [];
  if (missing.length > 0) {
    problems.push(`namespace ${namespace} lacks the search attribute${missing.length === 1 ? '' : 's'} ${missing.map((k) => k.name).join(', ')}`);
    fixes.push(...searchAttributeCreateCommands(namespace, missing).map((c) => `\`${c}\``));
  }
  for (const key of mistyped) {
    const actual = typeName(registered[key.name]);
    problems.push(`${key.name} is registered as ${CLI_TYPE_NAMES[actual] ?? actual}, and Sterna writes a ${CLI_TYPE_NAMES[key.type]}`);
    fixes.push(`\`temporal operator search-attribute remove --namespace ${namespace} --name ${key.name}\` then create it as a ${CLI_TYPE_NAMES[key.type]}`);
  }
  findings.push({ check, ok: false, problem: `${problems.join('; ')}: runs upserting them fail`, fix: `${fixes.join('; ')} (\`sterna search-attributes --namespace ${namespace}\` prints every line)` });
  return findings;
}

/** KEYWORD, INT...: the server's IndexedValueType (a number, or its name) as Sterna's keys name types. */
function typeName(value: number | string): string {
  const name = typeof value === 'number' ? (IndexedValueType as unknown as Record<number, string | undefined>)[value] : value;
  return (name ?? String(value)).replace(/^INDEXED_VALUE_TYPE_/, '');
}

function unreachable(address: string | undefined, err: unknown): Finding {
  const message = (err as Error)?.message ?? String(err);
  return {
    check: 'temporal:server',
    ok: false,
    problem: `the Temporal server${address ? ` at ${address}` : ''} did not answer (${message.slice(0, 300)})`,
    fix: 'start it (`npm run server`) or set TEMPORAL_ADDRESS (and TEMPORAL_NAMESPACE, TLS or API key) to your cluster',
  };
}
