/**
 * Errors in Compute Engine's JSON shape:
 *   { "error": { "code": 404, "message": "...", "errors": [{ "message", "domain", "reason" }] } }
 * The client library turns these into GoogleErrors with `code` = HTTP status, so the
 * reason strings must be GCE's own (notFound, alreadyExists, invalid, ...).
 */

export const Reason = {
  NotFound: 'notFound',
  AlreadyExists: 'alreadyExists',
  Invalid: 'invalid',
  Required: 'required',
  BadRequest: 'badRequest',
  ParseError: 'parseError',
  ResourceNotReady: 'resourceNotReady',
  RateLimitExceeded: 'rateLimitExceeded',
  BackendError: 'backendError',
  Forbidden: 'forbidden',
  RequestTooLarge: 'requestTooLarge',
  MethodNotAllowed: 'methodNotAllowed',
  InternalError: 'internalError',
  /** A precondition (setMetadata's fingerprint) no longer holds: HTTP 412. */
  ConditionNotMet: 'conditionNotMet',
  /** The request's server-side deadline (`X-Server-Timeout`) passed before it was processed: HTTP 504. */
  DeadlineExceeded: 'deadlineExceeded',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

export interface GceErrorJson {
  error: { code: number; message: string; errors: { message: string; domain: string; reason: string }[]; details?: unknown[] };
}

export class GceError extends Error {
  constructor(
    readonly status: number,
    readonly reason: Reason,
    message: string,
    readonly domain = 'global',
    /** google.rpc details (ErrorInfo, Help), as Google APIs add them to quota errors. */
    readonly details?: unknown[],
  ) {
    super(message);
  }

  toJSON(): GceErrorJson {
    const errors = [{ message: this.message, domain: this.domain, reason: this.reason }];
    return { error: { code: this.status, message: this.message, errors, ...(this.details ? { details: this.details } : {}) } };
  }
}

export function notFound(resource: string): GceError {
  return new GceError(404, Reason.NotFound, `The resource '${resource}' was not found`);
}

export function alreadyExists(resource: string): GceError {
  return new GceError(409, Reason.AlreadyExists, `The resource '${resource}' already exists`);
}

export function invalidField(field: string, value: unknown, why: string): GceError {
  const shown = typeof value === 'string' ? value : JSON.stringify(value);
  return new GceError(400, Reason.Invalid, `Invalid value for field '${field}': '${shown}'. ${why}`);
}

export function badRequest(message: string): GceError {
  return new GceError(400, Reason.BadRequest, message);
}

export function required(field: string): GceError {
  return new GceError(400, Reason.Required, `Required field '${field}' not specified`);
}

export function asGceError(err: unknown): GceError {
  if (err instanceof GceError) return err;
  return new GceError(500, Reason.InternalError, `Internal error: ${(err as Error)?.message ?? String(err)}`);
}
