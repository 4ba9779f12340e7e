/**
 * A watch that goes on until it is aborted, for the test bed's stand-ins for the kubelet
 * and the provisioning controller, which must see every event for as long as they run.
 *
 * A single watch ends on its own: @kubernetes/client-node 2 aborts one that has received
 * nothing for 30 s (1.x let it run), and an API server ends any after its request timeout.
 * So when one ends, the next starts from the last resourceVersion seen, and misses no
 * event in between; if the server no longer has that version (410 Gone), from now, when
 * it first lists every current object as ADDED (the handlers take those as they are).
 */
import { Watch, type KubeConfig } from '@kubernetes/client-node';

interface Watched {
  metadata?: { resourceVersion?: string };
  code?: number;
}

export interface ContinuousWatch {
  abort(): void;
}

export async function watchContinuously(
  kc: KubeConfig,
  path: string,
  onEvent: (type: string, object: never) => void,
  log: (line: string) => void,
): Promise<ContinuousWatch> {
  let aborted = false;
  let current: { abort(): void } | undefined;
  let resourceVersion: string | undefined;

  const start = async (): Promise<void> => {
    const request = await new Watch(kc).watch(
      path,
      resourceVersion ? { resourceVersion } : {},
      (type: string, object: Watched) => {
        // An ERROR event is the server's Status: 410 means the version is gone.
        if (type === 'ERROR') {
          if (object?.code === 410) resourceVersion = undefined;
          return;
        }
        if (object?.metadata?.resourceVersion) resourceVersion = object.metadata.resourceVersion;
        onEvent(type, object as never);
      },
      (err: unknown) => {
        if (aborted) return;
        const status = (err as { statusCode?: number } | undefined)?.statusCode;
        if (status === 410) resourceVersion = undefined;
        // The inactivity timeout is the expected end of a quiet watch; anything else is said.
        if (err && (err as Error).name !== 'TimeoutError') log(`watch of ${path} ended: ${String(err)}; watching again`);
        setTimeout(() => void again(), err && (err as Error).name !== 'TimeoutError' ? 1000 : 0).unref();
      },
    );
    if (aborted) request.abort();
    else current = request;
  };
  const again = async (): Promise<void> => {
    if (aborted) return;
    await start().catch((err: unknown) => {
      log(`watch of ${path} could not start: ${String(err)}; trying again`);
      setTimeout(() => void again(), 1000).unref();
    });
  };

  await start();
  return {
    abort() {
      aborted = true;
      current?.abort();
    },
  };
}
