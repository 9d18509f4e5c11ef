import { type BulkItem, STATE_NONE } from "@ce/glue2";
import { FINAL_REST_STATES } from "@ce/model";
import { recordRequests, type JobRecord, type JobRequest } from "@ce/store";
import type { Logger } from "pino";
import type { Identity, Services } from "../context.js";
import { StoreUnavailable } from "../errors.js";
import { RETRY_AFTER_SECONDS, outageOf } from "../outage.js";
import type { OperationClass } from "../middleware/identity/scopes.js";
import type { StatusItem } from "./bulkstatus.js";
import { bulkInfo, infoBulkItems } from "./bulkinfo.js";

export const BULK_ACTIONS = ["info", "status", "kill", "clean", "restart", "delegations"] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export function isBulkAction(s: string | undefined): s is BulkAction {
  return (BULK_ACTIONS as readonly string[]).includes(s ?? "");
}

/** Token scope class of each action (docs/interface.md "Authentication"). */
export const ACTION_SCOPE: Record<BulkAction | "new", OperationClass> = {
  new: "jobcreate",
  info: "jobinfo",
  status: "jobinfo",
  delegations: "jobinfo",
  kill: "jobcancel",
  clean: "jobdelete",
  restart: "jobcreate",
};

type Command = JobRequest;

/**
 * E5 over any number of ids: one Redis round trip for the records, then (kill/clean/restart) the
 * requests written on the records and the jobs rung on the work list, all before the 202. Another owner's job answers exactly like a missing one (per-item 404 "Job not found").
 */
export async function runBulk(
  s: Services,
  action: BulkAction,
  ids: readonly string[],
  ctx: { identity: Identity; requestId: string; log: Logger; now?: Date },
): Promise<BulkItem[]> {
  if (action === "status") return bulkStatus(s, ids, ctx.identity);
  if (action === "info") return infoBulkItems(await bulkInfo(s, ids, ctx.identity, ctx.now));
  const records = await s.jobs.getMany(ids);
  const owned = records.map((r) => (r && r.owner === ctx.identity.subject ? r : undefined));
  const commands: Command[] = [];
  // A list may repeat an id: one command per job, so the queue work is bounded by distinct jobs.
  const queued = new Set<string>();
  const enqueue = (c: Command) => {
    if (!queued.has(c.jobId)) commands.push(c);
    queued.add(c.jobId);
  };

  const items = ids.map((id, i): BulkItem => {
    const r = owned[i];
    if (!r) return notFound(action, id);
    switch (action) {
      case "delegations":
        return { statusCode: 200, reason: "OK", id, delegationIds: r.delegations };
      case "kill":
        // Killing a job that already ended is a successful no-op, as on A-REX (clients expect 202).
        if (!FINAL_REST_STATES.has(r.rest)) enqueue({ action: "kill", jobId: id, requestId: ctx.requestId });
        return { statusCode: 202, reason: "Queued for killing", id };
      case "clean":
        enqueue({ action: "clean", jobId: id, requestId: ctx.requestId });
        return { statusCode: 202, reason: "Queued for cleaning", id };
      case "restart": {
        const refused = restartRefusal(r);
        if (refused) return { statusCode: 409, reason: refused, id };
        enqueue({ action: "restart", jobId: id, requestId: ctx.requestId });
        return { statusCode: 202, reason: "Queued for restarting", id };
      }
    }
  });

  if (commands.length > 0) {
    // On the job record and due on the JEM's work list before the 202 (the JEM acts on the record).
    try {
      await recordRequests(s.jobs, commands);
    } catch (err) {
      if (!outageOf(s).report(err)) ctx.log.error({ err }, "job request not recorded");
      throw new StoreUnavailable("Job store unavailable", RETRY_AFTER_SECONDS);
    }
    ctx.log.info({ action, jobs: commands.length }, "job commands recorded");
  }
  return items;
}

/**
 * The status action: only the states of the caller's own jobs are read, compared with the caller
 * in Redis (one script call, not whole records). Every item has a state ("None" for a job not
 * found, as A-REX answers); another owner's job answers exactly like a missing one.
 */
export async function bulkStatus(s: Services, ids: readonly string[], identity: Identity): Promise<StatusItem[]> {
  const states = await s.jobs.statesOwnedBy(ids, identity.subject);
  return ids.map((id, i) => {
    const rest = states[i];
    return rest ? { statusCode: 200, reason: "OK", id, state: rest } : { statusCode: 404, reason: "Job not found", id, state: STATE_NONE };
  });
}

function notFound(action: BulkAction, id: string): BulkItem {
  const base = { statusCode: 404, reason: "Job not found", id };
  if (action === "status") return { ...base, stateNone: true };
  return base;
}

/** Restart is only for failed jobs with restarts left (docs/architecture.md, Job flow: Restart). */
export function restartRefusal(r: JobRecord): string | undefined {
  if (r.state !== "FINISHED" || r.pending || r.outcome !== "failed" || !r.failedState) return "Job has not failed";
  if (r.rerun <= 0) return "No more restarts allowed";
  return undefined;
}
