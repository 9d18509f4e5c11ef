import type { Context } from "hono";
import type { AppEnv, Identity } from "../../context.js";

/**
 * Bearer-token identity. Placeholder until token verification lands (issue: identity and
 * delegations): a request carrying only a bearer token is treated as unauthenticated.
 */
export async function tokenIdentity(_c: Context<AppEnv>): Promise<Identity | undefined> {
  return undefined;
}
