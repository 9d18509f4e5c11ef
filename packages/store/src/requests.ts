import type { JobStore } from "./jobs.js";

/** A kill, clean or restart asked for by a client (REST bulk action) or an operator (ceadm). */
export interface JobRequest {
  action: "kill" | "clean" | "restart";
  jobId: string;
  /** The request that asked (log correlation). */
  requestId?: string | undefined;
}

/**
 * What a 202 for kill/clean/restart promises: the request is on the job record, in the
 * open-request set and due on the JEM's work list (one script per job, lua/request.lua) before
 * the caller answers. The JEM's state handlers act on the flags at their next look; its recovery
 * pass rings open requests again, so a ring lost with a Redis failover delays a request but never
 * loses it. A kill of a job that already ended records nothing. Any failure throws: the caller
 * must not answer 202. Returns the requests recorded.
 */
export async function recordRequests(jobs: JobStore, reqs: readonly JobRequest[]): Promise<JobRequest[]> {
  const recorded = await jobs.request(reqs);
  const rung = reqs.filter((_, i) => recorded[i]);
  if (rung.length > 0) await jobs.ringBell();
  return rung;
}
