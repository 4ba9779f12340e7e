/**
 * A VM's metadata server (GCE's `computeMetadata/v1/`), one per VM on its own loopback
 * port: the VM finds it through GCE_METADATA_HOST=127.0.0.1:<port>, the variable Google
 * libraries honour, and the port identifies the VM (a host:port cannot carry a path).
 *
 * As on GCE: requests need `Metadata-Flavor: Google` (403 otherwise) and are answered
 * with it; `?wait_for_change=true` (with `last_etag`, `timeout_sec`) hangs until the
 * value changes; `?recursive=true` returns a directory as JSON; `?alt=json|text`.
 * `instance/preempted` turns TRUE when the preemption begins. Guest attributes
 * (`instance/guest-attributes/<namespace>/<key>`) are writable with PUT (and DELETE)
 * only when the instance metadata has `enable-guest-attributes=TRUE`.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readBody, sendText } from './http';
import { internalAddress } from './render';
import type { InstanceRecord } from './types';

/** GCE guest attribute values are limited; 256 KiB keeps the state file small. */
const MAX_GUEST_ATTRIBUTE_BYTES = 256 * 1024;
/** Upper bound on `wait_for_change` hangs without timeout_sec (GCE's own server hangs for a long time, too). */
const MAX_WAIT_SECONDS = 3600;
const GUEST_ATTRIBUTE_NAME = /^[A-Za-z0-9_-]{1,128}$/;

export interface MetadataView {
  /** The instance as it stands, or undefined once deleted. */
  instance(): InstanceRecord | undefined;
  projectNumber: string;
  setGuestAttribute(namespace: string, key: string, value: string | undefined): void;
  /** A fresh access token for the VM's service account (`instance/service-accounts/<account>/token`). */
  accessToken?(): { access_token: string; expires_in: number; token_type: string };
  /** Subscribes to changes of the instance; returns the unsubscribe function. */
  onChange(listener: () => void): () => void;
  /** The guest OS powered itself off (the emulator's stand-in for ACPI power-off). */
  powerOff(): void;
  /** What the stand-in nvidia-smi prints (gpu-telemetry.ts); undefined for a VM without GPUs. */
  nvidiaSmi?(): string | undefined;
}

type Tree = { [key: string]: Tree | string };

function instanceTree(i: InstanceRecord, projectNumber: string): Tree {
  const scheduling = (i.resource.scheduling ?? {}) as Record<string, unknown>;
  const serviceAccounts = (i.resource.serviceAccounts ?? []) as { email?: string; scopes?: string[] }[];
  const email = serviceAccounts[0]?.email && serviceAccounts[0].email !== 'default' ? serviceAccounts[0].email : `${projectNumber}-compute@developer.gserviceaccount.com`;
  const account: Tree = { aliases: 'default', email, scopes: (serviceAccounts[0]?.scopes ?? []).join('\n') };
  const tags = ((i.resource.tags as { items?: string[] } | undefined)?.items ?? []) as string[];
  const guest: Tree = {};
  for (const [ns, values] of Object.entries(i.guestAttributes)) guest[ns] = { ...values };
  return {
    instance: {
      attributes: { ...i.metadata },
      'cpu-platform': 'Intel Cascade Lake',
      description: typeof i.resource.description === 'string' ? i.resource.description : '',
      'guest-attributes': guest,
      hostname: `${i.name}.${i.zone}.c.${i.project}.internal`,
      id: i.id,
      image: '',
      'machine-type': `projects/${projectNumber}/machineTypes/${i.machineType}`,
      'maintenance-event': 'NONE',
      name: i.name,
      // The address the instance's API resource shows (render.ts), reachable from its peers.
      'network-interfaces': { '0': { ip: internalAddress(i.id), network: `projects/${projectNumber}/networks/default` } },
      preempted: i.preempted ? 'TRUE' : 'FALSE',
      scheduling: {
        'automatic-restart': String(scheduling.automaticRestart ?? true).toUpperCase(),
        'on-host-maintenance': String(scheduling.onHostMaintenance ?? 'MIGRATE'),
        preemptible: i.provisioningModel === 'SPOT' ? 'TRUE' : 'FALSE',
      },
      'service-accounts': { default: account, [email]: account },
      tags: JSON.stringify(tags),
      zone: `projects/${projectNumber}/zones/${i.zone}`,
    },
    project: { 'numeric-project-id': projectNumber, 'project-id': i.project, attributes: {} },
  };
}

function resolve(tree: Tree, parts: string[]): Tree | string | undefined {
  let node: Tree | string | undefined = tree;
  for (const part of parts) {
    if (node === undefined || typeof node === 'string') return undefined;
    node = node[part];
  }
  return node;
}

function render(node: Tree | string, recursive: boolean, alt: string | null): string {
  if (typeof node === 'string') return alt === 'json' ? JSON.stringify(node) : node;
  if (recursive || alt === 'json') return JSON.stringify(node);
  return Object.entries(node)
    .map(([k, v]) => (typeof v === 'string' ? k : `${k}/`))
    .join('\n')
    .concat('\n');
}

function etagOf(body: string): string {
  return createHash('sha1').update(body).digest('hex').slice(0, 16);
}

export class MetadataServer {
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on `port` (0 for any); a VM adopted after a restart asks for its old port. */
  static start(view: MetadataView, port = 0): Promise<MetadataServer> {
    const server = createServer((req, res) => {
      handle(view, req, res).catch(() => sendText(res, 500, 'internal error\n'));
    });
    server.keepAliveTimeout = 5000;
    return new Promise((resolvePromise, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        server.unref();
        resolvePromise(new MetadataServer(server, (server.address() as { port: number }).port));
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolvePromise) => {
      this.server.close(() => resolvePromise());
      this.server.closeAllConnections();
    });
  }
}

function reply(res: ServerResponse, status: number, body: string, etag?: string): void {
  sendText(res, status, body, { 'Metadata-Flavor': 'Google', 'Content-Type': 'application/text', ...(etag ? { ETag: etag } : {}) });
}

async function handle(view: MetadataView, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://metadata.google.internal');
  if (url.pathname === '/' || url.pathname === '') return reply(res, 200, 'computeMetadata/\n');
  const flavor = String(req.headers['metadata-flavor'] ?? '').toLowerCase() === 'google' || String(req.headers['x-google-metadata-request'] ?? '').toLowerCase() === 'true';
  if (!flavor || req.headers['x-forwarded-for']) {
    return reply(res, 403, 'Your client does not have permission to get URL from this server. Missing Metadata-Flavor:Google header.\n');
  }
  if (url.pathname === '/emulator/v1/guest/poweroff') {
    if (req.method !== 'POST') return reply(res, 405, 'Method Not Allowed\n');
    view.powerOff();
    return reply(res, 200, '');
  }
  if (url.pathname === '/emulator/v1/guest/nvidia-smi') {
    if (req.method !== 'GET') return reply(res, 405, 'Method Not Allowed\n');
    const csv = view.nvidiaSmi?.();
    return csv === undefined ? reply(res, 404, 'No devices were found\n') : reply(res, 200, csv);
  }
  const prefix = '/computeMetadata/v1';
  if (!url.pathname.startsWith(`${prefix}/`) && url.pathname !== prefix) return reply(res, 404, 'Not Found\n');
  const parts = url.pathname
    .slice(prefix.length)
    .split('/')
    .filter((p) => p !== '')
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return '\0';
      }
    });
  if (parts.some((p) => p === '..' || p === '.' || p.includes('\0'))) return reply(res, 400, 'Bad Request\n');

  const instance = view.instance();
  if (!instance) return reply(res, 404, 'Not Found\n');

  if (parts[0] === 'instance' && parts[1] === 'guest-attributes' && req.method !== 'GET' && req.method !== 'HEAD') {
    return writeGuestAttribute(view, instance, parts.slice(2), req, res);
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') return reply(res, 405, 'Method Not Allowed\n');
  if (parts[0] === 'instance' && parts[1] === 'guest-attributes' && !instance.guestAttributesEnabled) {
    return reply(res, 403, 'Guest attributes endpoint access is disabled.\n');
  }
  if (parts[0] === 'instance' && parts[1] === 'service-accounts' && parts[3] === 'token' && parts.length === 4) {
    // A VM without a service account has no token to give, as on GCE.
    const hasAccount = ((instance.resource.serviceAccounts ?? []) as unknown[]).length > 0;
    if (!hasAccount || !view.accessToken) return reply(res, 404, 'Not Found\n');
    return sendText(res, 200, JSON.stringify(view.accessToken()), { 'Metadata-Flavor': 'Google', 'Content-Type': 'application/json' });
  }

  const recursive = url.searchParams.get('recursive') === 'true';
  const alt = url.searchParams.get('alt');
  const current = () => {
    const i = view.instance();
    const node = i ? resolve(instanceTree(i, view.projectNumber), parts) : undefined;
    return node === undefined ? undefined : render(node, recursive, alt);
  };
  let body = current();
  if (body === undefined && url.searchParams.get('wait_for_change') !== 'true') return reply(res, 404, 'Not Found\n');

  if (url.searchParams.get('wait_for_change') === 'true') {
    const lastEtag = url.searchParams.get('last_etag');
    const timeoutSec = Math.min(Number(url.searchParams.get('timeout_sec') ?? MAX_WAIT_SECONDS) || MAX_WAIT_SECONDS, MAX_WAIT_SECONDS);
    const startTag = body === undefined ? '' : etagOf(body);
    if (!lastEtag || lastEtag === startTag) {
      body = await new Promise<string | undefined>((resolveWait) => {
        let unsubscribe = () => undefined as void;
        const finish = (value: string | undefined) => {
          clearTimeout(timer);
          unsubscribe();
          resolveWait(value);
        };
        const timer = setTimeout(() => finish(current()), timeoutSec * 1000);
        timer.unref();
        unsubscribe = view.onChange(() => {
          const next = current();
          if ((next === undefined ? '' : etagOf(next)) !== startTag) finish(next);
        });
        // The response's 'close' before it is written means the VM hung up.
        res.once('close', () => finish(undefined));
      });
      if (res.destroyed) return;
    }
    if (body === undefined) return reply(res, 404, 'Not Found\n');
  }
  reply(res, 200, body!, etagOf(body!));
}

async function writeGuestAttribute(view: MetadataView, instance: InstanceRecord, parts: string[], req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!instance.guestAttributesEnabled) return reply(res, 403, 'Guest attributes endpoint access is disabled.\n');
  const [namespace, key] = parts;
  if (parts.length !== 2 || !GUEST_ATTRIBUTE_NAME.test(namespace) || !GUEST_ATTRIBUTE_NAME.test(key)) {
    return reply(res, 400, 'Guest attributes are written as instance/guest-attributes/<namespace>/<key>.\n');
  }
  if (req.method === 'DELETE') {
    view.setGuestAttribute(namespace, key, undefined);
    return reply(res, 200, '');
  }
  if (req.method !== 'PUT' && req.method !== 'POST') return reply(res, 405, 'Method Not Allowed\n');
  let value: string;
  try {
    value = await readBody(req, MAX_GUEST_ATTRIBUTE_BYTES);
  } catch {
    return reply(res, 413, 'Guest attribute value too large.\n');
  }
  view.setGuestAttribute(namespace, key, value);
  reply(res, 200, '');
}
