import type { Context } from "hono";
import { type JobRecord } from "@ce/store";
import { JOB_ID_RE } from "@ce/controldir";
import type { AppEnv } from "../../context.js";
import { NotFound } from "../../errors.js";

/**
 * The caller's job for E6/E7. Another owner's job is answered exactly like a missing one, and a
 * non-UUID id never reaches a path (ControlDir would throw).
 */
export async function ownedJob(c: Context<AppEnv>, id: string): Promise<JobRecord> {
  const { jobs } = c.get("services");
  const job = JOB_ID_RE.test(id) ? await jobs.getOwned(id, c.get("identity").subject) : undefined;
  if (!job) throw new NotFound("Job not found", "JOB_NOT_FOUND");
  return job;
}

/** As `ownedJob`, but a WIPED job (session directory removed after expiry) is 404 with that reason. */
export async function jobWithSession(c: Context<AppEnv>, id: string): Promise<JobRecord> {
  const job = await ownedJob(c, id);
  if (job.state === "DELETED") {
    throw new NotFound("The job's session directory was removed after its lifetime expired (job is WIPED)", "JOB_WIPED");
  }
  return job;
}
