/**
 * The one convention for the CE's errors: one small class per kind of failure, named after it,
 * with a stable `code` that callers, tests and log queries match on, and a message written for
 * whoever has to act on it (the grid user, the site admin). Extra facts are readonly fields of the
 * class, never parsed back out of the message. The gateway's HTTP errors (apps/gateway/src/errors.ts)
 * follow the same rule on Hono's HTTPException, which `onError` maps to the response.
 * `errors-convention.test.ts` holds every error class of the code base to it.
 */
export class Failure<C extends string = string> extends Error {
  constructor(
    readonly code: C,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
