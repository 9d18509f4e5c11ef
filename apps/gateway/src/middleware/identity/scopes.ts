import type { Context } from "hono";
import type { CompiledConfig } from "@ce/config";
import type { AppEnv, Identity } from "../../context.js";
import { Forbidden } from "../../errors.js";

/**
 * Operation classes of the REST interface (docs/interface.md "Authentication"; A-REX's `tokenscopes`) and the WLCG
 * compute scope a token caller needs for each. X.509 callers are not scope-limited. `/info` and the
 * versions list need no scope.
 *
 *   jobinfo    GET/HEAD /jobs; bulk info, status, delegations; GET /delegations; delegation get; diagnose
 *   jobcreate  job submission; bulk restart; delegation new, PUT, renew
 *   jobcancel  bulk kill
 *   jobdelete  bulk clean; delegation delete
 *   datainfo   session directory listing, PROPFIND
 *   dataread   session file GET/HEAD
 *   datawrite  session PUT, DELETE
 */
export const OPERATION_SCOPES = {
  jobinfo: "compute.read",
  jobcreate: "compute.create",
  jobcancel: "compute.cancel",
  jobdelete: "compute.cancel",
  datainfo: "compute.read",
  dataread: "compute.read",
  datawrite: "compute.modify",
} as const;
export type OperationClass = keyof typeof OPERATION_SCOPES;

/** The scope the identity lacks for `op`, or undefined when it may proceed. */
export function missingScope(config: CompiledConfig, id: Identity | undefined, op: OperationClass): string | undefined {
  if (!id || id.kind !== "token" || !config.auth.tokens.requireScopes) return undefined;
  const needed = OPERATION_SCOPES[op];
  return id.scopes?.has(needed) ? undefined : needed;
}

/** Throws 403 naming the missing scope (RFC 6750 `insufficient_scope`) when a token caller lacks it. */
export function requireScope(c: Context<AppEnv>, op: OperationClass): void {
  const needed = missingScope(c.get("services").config, c.get("identity"), op);
  if (needed) {
    throw new Forbidden(`Operation is not allowed: ${op} needs token scope ${needed}`, "SCOPE_MISSING", {
      "WWW-Authenticate": `Bearer error="insufficient_scope", scope="${needed}"`,
    });
  }
}

/**
 * Globus semantics of a limited proxy: it may read, transfer data and manage existing jobs, but
 * may not start a job. Submission and restart (which runs the job again) are refused with 403.
 */
export function requireFullProxy(c: Context<AppEnv>, what: string): void {
  if (c.get("identity")?.limited) {
    throw new Forbidden(
      `A limited proxy may not ${what}: create a full proxy (arcproxy without --constraint=proxyPolicy=limited)`,
      "LIMITED_PROXY",
    );
  }
}
