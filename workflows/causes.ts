/**
 * Walking an error's `cause` chain. Temporal wraps the reason a call failed one or two
 * layers deep, and the outer message rarely says why:
 *
 *   WorkflowUpdateFailedError "Workflow Update failed"
 *     -> ApplicationFailure (InvalidSpec) "budget $1 is below the $2.5000 already spent"
 *   ServiceError "Failed to start Workflow"
 *     -> gRPC error, code 8, details "grpc: received message larger than max (...)"
 *
 * Duck-typed with no imports: the workflow, the client and the CLI all walk chains with it.
 */

/** The error and each of its causes, outermost first; stops at a cycle. */
export function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  let link = err;
  while (link !== undefined && link !== null && !chain.includes(link)) {
    chain.push(link);
    link = typeof link === 'object' ? (link as { cause?: unknown }).cause : undefined;
  }
  return chain;
}

/** The first link of the chain that `match` accepts. */
export function findCause<T>(err: unknown, match: (link: unknown) => link is T): T | undefined {
  return causeChain(err).find(match) as T | undefined;
}

/** A gRPC status error as @grpc/grpc-js throws it: `details` holds the server's own words. */
export interface GrpcStatusError extends Error {
  code: number;
  details: string;
}

export function isGrpcStatusError(link: unknown): link is GrpcStatusError {
  return link instanceof Error && typeof (link as GrpcStatusError).code === 'number' && typeof (link as GrpcStatusError).details === 'string';
}

/** What one link says: a gRPC error's details (its message repeats them after the code). */
function wordsOf(link: unknown): string {
  if (isGrpcStatusError(link)) return link.details || link.message;
  if (link instanceof Error) return link.message;
  return typeof link === 'string' ? link : JSON.stringify(link);
}

/**
 * Everything the chain says, outermost first, without repeats: a link whose words an
 * earlier link already quoted adds nothing.
 *
 *   causeMessages(updateError) // ['Workflow Update failed', 'budget must be a positive number of USD, got -1']
 */
export function causeMessages(err: unknown): string[] {
  const messages: string[] = [];
  for (const link of causeChain(err)) {
    const words = wordsOf(link).trim();
    if (words && !messages.some((m) => m.includes(words))) messages.push(words);
  }
  return messages;
}
