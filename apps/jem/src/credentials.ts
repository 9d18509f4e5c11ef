import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CompiledConfig } from "@ce/config";
import { SecretBox, type JobCredential, type JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "./context.js";

/**
 * The key that seals delegations at rest: `delegations.encryptionKey`, else the key file, else the
 * development key under the state dir (created on first use, exclusive create so racing gateways
 * and JEMs end up with the same key).
 */
export function loadSecretBox(config: CompiledConfig): SecretBox {
  const d = config.delegations;
  if (d.encryptionKey) return new SecretBox(d.encryptionKey);
  const file = d.encryptionKeyFile ?? join(config.paths.stateDir, "delegation.key");
  try {
    return new SecretBox(readFileSync(file, "utf8").trim());
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT" || d.encryptionKeyFile) throw e;
  }
  try {
    writeFileSync(file, SecretBox.generateKey(), { mode: 0o600, flag: "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  return new SecretBox(readFileSync(file, "utf8").trim());
}

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
    jobLog(ctx, job).warn({ err: e, delegationId: id }, "delegation could not be read");
    return undefined;
  }
}

/** The credential plus, for X.509, the refreshed `proxy` control file (mode 0600) the batch job uses. */
export async function resolveCredential(ctx: JemContext, job: JobRecord, delegationId?: string): Promise<(JobCredential & { file?: string }) | undefined> {
  const cred = await credentialFor(ctx, job, delegationId);
  if (!cred) return undefined;
  if (cred.type === "x509") {
    await ctx.control.write(job.id, "proxy", cred.proxyPem, 0o600);
    return { ...cred, file: ctx.control.file(job.id, "proxy") };
  }
  return cred;
}
