/** Small HTTP helpers shared by the GCE API, the admin API and the metadata servers. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GceError, Reason } from './errors';

/** Compute Engine refuses request bodies above a few MB; 2 MiB is ample for an instance resource. */
export const MAX_BODY_BYTES = 2 * 1024 * 1024;

export async function readBody(req: IncomingMessage, limitBytes = MAX_BODY_BYTES): Promise<string> {
  return (await readBodyBytes(req, limitBytes)).toString('utf8');
}

/** The body's bytes, as they came (an object upload's). */
export function readBodyBytes(req: IncomingMessage, limitBytes = MAX_BODY_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limitBytes) {
        failed = true;
        reject(new GceError(413, Reason.RequestTooLarge, `Request body exceeds ${limitBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!failed) resolve(Buffer.concat(chunks));
    });
    req.on('error', (err) => {
      if (!failed) reject(err);
    });
  });
}

/** Parses a JSON body; empty means `{}` (the client sends "" for bodyless POSTs such as operations.wait). */
export function parseJson(text: string): unknown {
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new GceError(400, Reason.ParseError, `Invalid JSON payload received. ${(err as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendText(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=UTF-8', 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function sendError(res: ServerResponse, err: GceError): void {
  sendJson(res, err.status, err.toJSON());
}

/**
 * Splits a URL path into decoded segments. Empty segments, `.`/`..`, and segments
 * that decode to a slash or a control character are refused, so a name can never
 * address a file outside its directory.
 */
export function pathSegments(pathname: string): string[] {
  const raw = pathname.split('/').slice(1);
  if (raw.length > 0 && raw[raw.length - 1] === '') raw.pop();
  return raw.map((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw new GceError(400, Reason.Invalid, `Invalid URL path segment '${segment}'`);
    }
    // eslint-disable-next-line no-control-regex
    if (decoded === '' || decoded === '.' || decoded === '..' || /[/\\\u0000-\u001f]/.test(decoded)) {
      throw new GceError(400, Reason.Invalid, `Invalid URL path segment '${segment}'`);
    }
    return decoded;
  });
}
