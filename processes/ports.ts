/** Port helpers: prefer a well-known port, fall back to any free one. */
import { createServer } from 'node:net';

/** Resolves `port` if it is free (0 asks for any free port), undefined if it is taken. */
export function freePort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => {
      const { port: bound } = srv.address() as { port: number };
      srv.close(() => resolve(bound));
    });
  });
}
