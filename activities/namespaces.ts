/**
 * Which Temporal namespace an activity talks to, decided by the worker's configuration and
 * the namespace of the workflow that called it, never by the activity's input.
 *
 * A team is a namespace: its runs execute there. The fleet workflows (observer, zone and
 * throughput memories, price book, reaper, team ledgers) live in the system namespace,
 * which only the platform's workers and admins may write. A workflow cannot signal or
 * start across namespaces, so every message between the two goes through an activity of
 * the platform's worker, with one client per namespace on the worker's own connection.
 *
 * What an activity may trust: `Context.current().info` (the namespace, type and id of the
 * workflow that scheduled it) is the server's record, which no team can forge. Its input
 * is workflow code's; a team can start a workflow of any registered type in its own
 * namespace with any input, so an input never names a namespace to act in.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';

/** The namespace of the current activity's workflow; undefined outside an activity (a direct call, the CLI). */
export function activityNamespace(): string | undefined {
  try {
    return Context.current().info.namespace;
  } catch {
    return undefined;
  }
}

/** The namespaces one worker process serves. */
export interface Tenancy {
  /** Where the fleet workflows live. */
  system: string;
  /** Where runs may execute (each one a team). May include `system` (one namespace for everything). */
  teams: readonly string[];
  /**
   * `namespaces`: a namespace per team, the fleet in the system namespace (STERNA_TEAM_NAMESPACES set).
   * `single`: one namespace for runs and fleet (the demo, the dev server), which is the one
   * team. In both a run's team is the namespace it executes in.
   */
  mode: 'namespaces' | 'single';
}

/** The failure type of a call from a namespace that may not make it (not retried). */
export const NOT_ALLOWED = 'NamespaceNotAllowed';

export class NamespaceClients {
  private readonly clients = new Map<string, Client>();

  constructor(
    readonly tenancy: Tenancy,
    /** Builds the client of a namespace (called once per namespace, lazily). */
    private readonly make: (namespace: string) => Client,
  ) {
    if (!tenancy.system) throw new Error('the system namespace must be named');
    if (tenancy.teams.length === 0) throw new Error('at least one team namespace must be configured');
  }

  /** Everything in the client's namespace: runs, fleet and ledgers, as before tenancy. */
  static single(client: Client): NamespaceClients {
    const ns = client.options.namespace;
    return new NamespaceClients({ system: ns, teams: [ns], mode: 'single' }, (namespace) => {
      if (namespace !== ns) throw new Error(`this worker serves only namespace ${ns}`);
      return client;
    });
  }

  /** The fleet workflows' namespace. */
  get system(): Client {
    return this.of(this.tenancy.system);
  }

  isTeam(namespace: string): boolean {
    return this.tenancy.teams.includes(namespace);
  }

  /** The client of a configured namespace; any other is refused. */
  of(namespace: string): Client {
    if (namespace !== this.tenancy.system && !this.isTeam(namespace)) {
      throw ApplicationFailure.nonRetryable(`namespace ${namespace} is not served by this worker (system ${this.tenancy.system}, teams ${this.tenancy.teams.join(', ')}); see docs/tenancy.md`, NOT_ALLOWED);
    }
    let client = this.clients.get(namespace);
    if (!client) this.clients.set(namespace, (client = this.make(namespace)));
    return client;
  }

  /** The team clients, one per configured team namespace. */
  teams(): Client[] {
    return this.tenancy.teams.map((ns) => this.of(ns));
  }

  /**
   * The namespace of the workflow that scheduled the current activity: the namespace whose
   * task queue the worker polled it from (the server's record; a workflow's activities run
   * in its own namespace).
   */
  static callerNamespace(): string {
    return Context.current().info.namespace;
  }

  /**
   * The team of the calling run: its namespace, which must be a configured team. In
   * `single` mode, the caller's namespace (the one team namespace there is).
   */
  callerTeam(what: string): string {
    const ns = NamespaceClients.callerNamespace();
    if (!this.isTeam(ns)) {
      throw ApplicationFailure.nonRetryable(`${what}: the calling workflow executes in namespace ${ns}, which is not configured as a team (STERNA_TEAM_NAMESPACES: ${this.tenancy.teams.join(', ')}); start runs in a team's namespace`, NOT_ALLOWED);
    }
    return ns;
  }

  /** Refuses unless the calling workflow executes in the system namespace (a fleet workflow a team started in its own namespace may not act on others). */
  requireSystemCaller(what: string): void {
    const ns = NamespaceClients.callerNamespace();
    if (ns !== this.tenancy.system) {
      throw ApplicationFailure.nonRetryable(`${what}: only workflows of the system namespace ${this.tenancy.system} may do this; the caller executes in ${ns}`, NOT_ALLOWED);
    }
  }
}

/** Where a workflow id runs among the team namespaces. */
export type Located = { namespace: string; client: Client } | 'not-found' | 'ambiguous';

/** Workflow ids whose namespace is remembered (oldest forgotten first). */
const LOCATED_KEPT = 20_000;

/**
 * Finds the team namespace of a run that a cloud resource names by workflow id alone (the
 * observer's signals, the reaper's and notifications' reads). With one team namespace that
 * is it, with no call. Otherwise every team namespace is asked (describe, the server's own
 * record) and the answer remembered: the one where it is running, or the only one that has
 * it. Two teams running the same workflow id is 'ambiguous': nothing is sent to either,
 * so one team can never be told of (or act on) another's resource.
 */
export class RunLocator {
  private readonly known = new Map<string, string>();

  constructor(private readonly namespaces: NamespaceClients) {}

  async locate(workflowId: string): Promise<Located> {
    const teams = this.namespaces.tenancy.teams;
    if (teams.length === 1) return { namespace: teams[0], client: this.namespaces.of(teams[0]) };
    const kept = this.known.get(workflowId);
    if (kept) return { namespace: kept, client: this.namespaces.of(kept) };
    const found = await Promise.all(
      teams.map(async (namespace) => {
        try {
          const { status } = await this.namespaces.of(namespace).workflow.getHandle(workflowId).describe();
          return { namespace, running: status.name === 'RUNNING' };
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return undefined;
          throw err;
        }
      }),
    );
    const present = found.filter((f): f is { namespace: string; running: boolean } => f !== undefined);
    const running = present.filter((f) => f.running);
    if (running.length > 1) return 'ambiguous';
    const chosen = running[0] ?? (present.length === 1 ? present[0] : undefined);
    if (!chosen) return present.length === 0 ? 'not-found' : 'ambiguous';
    if (running.length === 1) this.remember(workflowId, chosen.namespace);
    return { namespace: chosen.namespace, client: this.namespaces.of(chosen.namespace) };
  }

  /** Forgets a run (it was not found where it was remembered). */
  forget(workflowId: string): void {
    this.known.delete(workflowId);
  }

  private remember(workflowId: string, namespace: string): void {
    if (this.known.size >= LOCATED_KEPT) this.known.delete(this.known.keys().next().value!);
    this.known.set(workflowId, namespace);
  }
}
