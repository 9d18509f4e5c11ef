import { redisTrouble, type JobCredential, type JobRecord } from "@ce/store";
import { join } from "node:path";
import { fileq } from "@ce/controldir";
import { jobLog, type JemContext } from "./context.js";
import { removeSessionToken } from "./credential-files.js";

/** The key that seals delegations at rest: the one loader of @ce/store (daemon.ts imports it from here). */
export { loadSecretBox } from "@ce/store";

/**
 * A job's credential for staging or the batch job: the given (per-file) delegation, else the
 * job's main one. Read fresh every time so a renewed delegation reaches running jobs.
 */
export async function credentialFor(ctx: JemContext, job: JobRecord, delegationId?: string): Promise<JobCredential | undefined> {
  const id = delegationId ?? job.mainDelegation ?? job.delegations[0];
  if (!id || !ctx.delegations) return undefined;
  try {
    return await ctx.delegations.credential(job.owner, id);
  } catch (e) {
    // Redis trouble must not send the job on without its credential: the step is redone after it.
    if (redisTrouble(e)) throw e;
    jobLog(ctx, job).warn({ err: e, delegationId: id }, "delegation could not be read");
    return undefined;
  }
}

/** The WLCG token profile's "any audience": a token any service accepts (a stolen one works everywhere). */
export const WLCG_ANY_AUDIENCE = "https://wlcg.cern.ch/jwt/v1/any";

/** The `aud` claim of a JWT as a list (no signature check: the gateway verified it at delegation). */
export function tokenAudiences(token: string): string[] | undefined {
  const payload = token.split(".")[1];
  if (!payload || token.split(".").length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { aud?: unknown };
    const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    return aud.filter((a): a is string => typeof a === "string");
  } catch {
    return undefined;
  }
}

const originOf = (u: string) => {
  try {
    return new URL(u).origin;
  } catch {
    return undefined;
  }
};

/**
 * Why a bearer token must not be sent to `url` (undefined = it may). A token is sent only over
 * https and only to an endpoint whose origin (scheme, host, port) is one of the token's `aud`
 * values; the WLCG any-audience counts only when the operator allows it
 * (`staging.allowAnyAudienceTokens`). A token without a readable `aud` is never sent.
 */
export function tokenRefusal(token: string, url: string, allowAny: boolean): string | undefined {
  const target = new URL(url);
  if (target.protocol !== "https:") return "a token is sent over https only";
  const auds = tokenAudiences(token);
  if (!auds || auds.length === 0) return "the token names no audience (aud)";
  if (auds.includes(WLCG_ANY_AUDIENCE)) {
    if (allowAny) return undefined;
    if (auds.length === 1)
      return `the token's audience is the WLCG any-audience, which this CE does not accept (staging.allowAnyAudienceTokens)`;
  }
  if (auds.some((a) => a !== WLCG_ANY_AUDIENCE && originOf(a) === target.origin)) return undefined;
  return `the endpoint ${target.origin} is not the token's audience (${auds.join(", ")})`;
}

/**
 * The job's proxy file is for the batch job only (staging reads delegations from the store):
 * once the batch job is over it goes, instead of lying in the batch dir until the wipe.
 */
export async function removeProxyFile(ctx: JemContext, job: JobRecord): Promise<void> {
  const warn = (e: unknown) => jobLog(ctx, job).warn({ err: e }, "proxy file not removed");
  // The batch dir's (credential-files.ts), a control dir copy an older version wrote there, and the
  // session's bearer token (ENV/TOKEN), before the stage-out could deliver it; each on its own.
  // unlink never follows a link the job planted.
  await Promise.all([
    fileq.one(["unlink", join(ctx.control.batchDir(job.id), "proxy")]).catch(warn),
    ctx.control.remove(job.id, "proxy").catch(warn),
    removeSessionToken(ctx, job),
  ]);
}
