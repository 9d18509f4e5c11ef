import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * One small error class per failure, each with a stable `code`; all of them are HTTPExceptions so
 * `onError` (app.ts) maps them once into the negotiated error document (docs/decisions.md #10).
 */
export class CeError extends HTTPException {
  constructor(
    status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(status, { message });
    this.name = new.target.name;
  }
}

export class BadRequest extends CeError {
  constructor(message: string, code = "BAD_REQUEST") {
    super(400, code, message);
  }
}
export class Unauthorized extends CeError {
  /** `wwwAuthenticate` is the full header value, e.g. `Bearer error="invalid_token", error_description="..."` */
  constructor(message: string, wwwAuthenticate?: string, code = "UNAUTHENTICATED") {
    super(401, code, message, wwwAuthenticate ? { "WWW-Authenticate": wwwAuthenticate } : {});
  }
}
export class Forbidden extends CeError {
  constructor(message: string, code = "FORBIDDEN", headers: Record<string, string> = {}) {
    super(403, code, message, headers);
  }
}
export class NotFound extends CeError {
  constructor(message = "Not Found", code = "NOT_FOUND") {
    super(404, code, message);
  }
}
export class MethodNotAllowed extends CeError {
  constructor(allow: readonly string[]) {
    super(405, "METHOD_NOT_ALLOWED", `Method not allowed here; allowed: ${allow.join(", ")}`, { Allow: allow.join(", ") });
  }
}
export class PayloadTooLarge extends CeError {
  constructor(what: string, limit: number) {
    super(413, "PAYLOAD_TOO_LARGE", `${what} exceeds the limit of ${limit} bytes`);
  }
}
export class UnsupportedMediaType extends CeError {
  constructor(message: string) {
    super(415, "UNSUPPORTED_MEDIA_TYPE", message);
  }
}
export class RangeNotSatisfiable extends CeError {
  constructor(size: number) {
    super(416, "RANGE_NOT_SATISFIABLE", "Range not satisfiable", { "Content-Range": `bytes */${size}` });
  }
}
export class TooManyRequests extends CeError {
  constructor(retryAfterSeconds: number, reason = `Too many requests; retry after ${retryAfterSeconds} s`, code = "RATE_LIMITED") {
    super(429, code, reason, { "Retry-After": String(retryAfterSeconds) });
  }
}
export class ServiceUnavailable extends CeError {
  constructor(message: string, code = "UNAVAILABLE") {
    super(503, code, message);
  }
}
/**
 * Redis (the job store and the queues) is down, restarting, out of memory or refusing writes:
 * a 503 the client may retry after `Retry-After`, never a 500 (outage.ts maps the error).
 */
export class StoreUnavailable extends CeError {
  constructor(reason: string, retryAfterSeconds: number, code = "STORE_UNAVAILABLE") {
    super(503, code, `${reason}; retry after ${retryAfterSeconds} s`, { "Retry-After": String(retryAfterSeconds) });
  }
}
