import type { Context } from "hono";
import type { AppEnv } from "../../context.js";
import { Forbidden } from "../../errors.js";

/**
 * Operation classes of the REST interface (arex-rest.md §3.3) and the WLCG compute scope each
 * needs from a token caller. X.509 callers are not scope-limited.
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

/** Throws 403 naming the missing scope when a token caller lacks it. */
export function requireScope(c: Context<AppEnv>, op: OperationClass): void {
  const id = c.get("identity");
  const { config } = c.get("services");
  if (!id || id.kind !== "token" || !config.auth.tokens.requireScopes) return;
  const needed = OPERATION_SCOPES[op];
  if (!id.scopes?.has(needed)) {
    throw new Forbidden(`Operation is not allowed: token scope ${needed} missing`, "SCOPE_MISSING", {
      "WWW-Authenticate": `Bearer error="insufficient_scope", scope="${needed}"`,
    });
  }
}
