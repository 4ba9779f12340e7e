/**
 * A pass-through HTTP proxy in front of the emulator that counts the Compute requests it
 * forwards, by kind, so a test measures API calls on the wire rather than trusting the
 * caller's own bookkeeping.
 */
import { createServer, request as forward, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type RequestKind = 'aggregatedInstances' | 'guestAttributes' | 'operationsList' | 'instanceGet' | 'other';

export interface CountingProxy {
  port: number;
  counts(): Record<RequestKind, number>;
  close(): Promise<void>;
}

export function kindOf(method: string, path: string): RequestKind {
  const url = path.split('?')[0];
  if (method === 'GET' && url.endsWith('/aggregated/instances')) return 'aggregatedInstances';
  if (method === 'GET' && url.endsWith('/getGuestAttributes')) return 'guestAttributes';
  if (method === 'GET' && /\/zones\/[^/]+\/operations$/.test(url)) return 'operationsList';
  if (method === 'GET' && /\/zones\/[^/]+\/instances\/[^/]+$/.test(url)) return 'instanceGet';
  return 'other';
}

export async function startCountingProxy(targetPort: number): Promise<CountingProxy> {
  const counts: Record<RequestKind, number> = { aggregatedInstances: 0, guestAttributes: 0, operationsList: 0, instanceGet: 0, other: 0 };
  const server: Server = createServer((req, res) => {
    counts[kindOf(req.method ?? 'GET', req.url ?? '')]++;
    const upstream = forward({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    counts: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
