/**
 * The codec server: lets the Temporal web UI and `temporal workflow show --codec-endpoint`
 * show decoded payloads to those allowed to see them, without giving them the keys.
 * It speaks Temporal's remote codec protocol:
 *
 *   POST /decode  (and /encode)   {"payloads": [{"metadata": {k: base64}, "data": base64}]}
 *                              -> {"payloads": [...]}
 *
 * CORS answers only the origins given (the web UI's), since the browser calls it from the
 * UI's page. With a token, every request must carry `Authorization: Bearer <token>`
 * (`temporal ... --codec-auth "Bearer <token>"`); without one, it must listen on loopback
 * only, where the UI and the CLI of this machine reach it.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';

/** Batches of payloads from the UI are small; a history page holds a few MB at most. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface CodecServerOptions {
  codec: PayloadCodec;
  port?: number;
  host?: string;
  /** Browser origins allowed to call it, e.g. http://127.0.0.1:8233 (the dev server's UI). */
  corsOrigins: string[];
  /** When set, required as `Authorization: Bearer <token>`. */
  token?: string;
}

export interface CodecServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

interface JsonPayload {
  metadata?: Record<string, string> | null;
  data?: string | null;
}

function fromJson(payload: JsonPayload): Payload {
  const metadata: Record<string, Uint8Array> = {};
  for (const [key, value] of Object.entries(payload.metadata ?? {})) metadata[key] = Buffer.from(value, 'base64');
  return { metadata, data: Buffer.from(payload.data ?? '', 'base64') };
}

function toJson(payload: Payload): JsonPayload {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(payload.metadata ?? {})) metadata[key] = Buffer.from(value).toString('base64');
  return { metadata, data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64') };
}

function isPayloadList(body: unknown): body is { payloads: JsonPayload[] } {
  const payloads = (body as { payloads?: unknown })?.payloads;
  return Array.isArray(payloads) && payloads.every((p) => p !== null && typeof p === 'object' && (p.data === undefined || p.data === null || typeof p.data === 'string'));
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (!token) return true;
  const given = String(req.headers.authorization ?? '');
  return timingSafeEqual(digest(given), digest(`Bearer ${token}`));
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function codecServerHandler(options: CodecServerOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const origins = new Set(options.corsOrigins.map((o) => o.replace(/\/+$/, '')));
  return async (req, res) => {
    const origin = String(req.headers.origin ?? '');
    if (origins.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Vary', 'Origin');
    }
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
    const operation = path.endsWith('/decode') ? 'decode' : path.endsWith('/encode') ? 'encode' : undefined;
    if (req.method === 'OPTIONS') {
      // The browser's preflight carries no credentials; the request that follows must.
      res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', 'Content-Type, X-Namespace, Authorization');
      res.setHeader('Access-Control-Max-Age', '600');
      res.writeHead(operation ? 204 : 404);
      return void res.end();
    }
    if (!operation) return send(404, { message: 'POST /decode or /encode' });
    if (req.method !== 'POST') return send(405, { message: 'POST only' });
    if (!authorized(req, options.token)) {
      req.resume();
      return send(401, { message: 'missing or wrong Authorization: Bearer token' });
    }
    const text = await readBody(req);
    if (text === undefined) return send(413, { message: `at most ${MAX_BODY_BYTES} bytes` });
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return send(400, { message: 'the body is not JSON' });
    }
    if (!isPayloadList(body)) return send(400, { message: 'expected {"payloads": [{"metadata": {...}, "data": "<base64>"}]}' });
    try {
      const payloads = body.payloads.map(fromJson);
      const result = operation === 'decode' ? await options.codec.decode(payloads) : await options.codec.encode(payloads);
      send(200, { payloads: result.map(toJson) });
    } catch (err) {
      // Which key is missing, or that a payload does not authenticate: never key material.
      send(400, { message: (err as Error).message });
    }
  };
}

export function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  const host = options.host ?? '127.0.0.1';
  const loopback = host === '127.0.0.1' || host === '::1' || host === 'localhost';
  if (!loopback && !options.token) {
    return Promise.reject(new Error(`a codec server on ${host} decrypts for anyone who reaches it: set STERNA_CODEC_SERVER_TOKEN, or listen on 127.0.0.1`));
  }
  const handler = codecServerHandler(options);
  const server: Server = createServer((req, res) => {
    handler(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      const port = (server.address() as { port: number }).port;
      resolve({
        url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
        port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
