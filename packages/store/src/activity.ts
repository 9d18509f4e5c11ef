import { awaitingMessage, glueStates, shownLrmsReason, toRestState, type InternalState } from "@ce/model";
import type { JobRecord } from "./jobs.js";

/**
 * The facts of one job for its GLUE2 ComputingActivity (the `info` bulk action and the JEM's
 * `xml` control file). Structurally the `ActivityInput` of @ce/glue2 — declared here so the store
 * does not depend on the rendering package; pass the result to `buildActivityDocument`.
 */
export interface ActivityFacts {
  id: string;
  hostname: string;
  now: Date;
  name?: string | undefined;
  jobDescription?: string | undefined;
  states: string[];
  restartStates?: string[] | undefined;
  localIdFromManager?: string | undefined;
  exitCode?: number | undefined;
  errors?: string | undefined;
  owner?: string | undefined;
  /** The mapped local account (GLUE2 LocalOwner). */
  localOwner?: string | undefined;
  fqans?: readonly string[] | undefined;
  /** The batch system's reason the job waits (OtherInfo `LRMSReason=…`, OtherMessages `LRMS: …`). */
  lrmsReason?: string | undefined;
  requestedTotalWallTime?: number | undefined;
  requestedTotalCpuTime?: number | undefined;
  requestedSlots?: number | undefined;
  requestedApplicationEnvironments?: string[] | undefined;
  stdin?: string | undefined;
  stdout?: string | undefined;
  stderr?: string | undefined;
  logDir?: string | undefined;
  executionNodes?: string[] | undefined;
  queue?: string | undefined;
  usedTotalWallTime?: number | undefined;
  usedTotalCpuTime?: number | undefined;
  usedMainMemory?: number | undefined;
  submissionTime?: Date | undefined;
  startTime?: Date | undefined;
  endTime?: Date | undefined;
  workingAreaEraseTime?: Date | undefined;
  proxyExpirationTime?: Date | undefined;
  submissionHost?: string | undefined;
  otherMessages?: readonly string[] | undefined;
}

/**
 * The record fields the activity document is made of (and `rest`, which decoding checks): what
 * bulk info reads from Redis (JobStore.getManyFields) instead of whole records.
 */
export const ACTIVITY_FIELDS = [
  "id",
  "owner",
  "state",
  "pending",
  "outcome",
  "lrms",
  "lrmsReason",
  "rest",
  "jobName",
  "language",
  "localId",
  "exitCode",
  "failure",
  "failedState",
  "localUser",
  "fqans",
  "summary",
  "queue",
  "nodes",
  "usedWallSeconds",
  "usedCpuSeconds",
  "usedMemoryMB",
  "created",
  "startedAt",
  "endedAt",
  "cleanupAt",
  "delegationExpires",
  "clientHost",
  "awaiting",
  "uploadDeadline",
] as const satisfies readonly (keyof JobRecord)[];

/** The part of a job record `activityInputFor` reads (a whole JobRecord is one). */
export type ActivityRecord = Pick<JobRecord, (typeof ACTIVITY_FIELDS)[number]>;

const date = (ms: number | undefined) => (ms !== undefined && Number.isFinite(ms) && ms > 0 ? new Date(ms) : undefined);

/**
 * Every member is set, absent ones to undefined: one object shape for every job (bulk info builds
 * 100 per request; the renderers skip undefined members).
 */
export function activityInputFor(record: ActivityRecord, opts: { hostname: string; now?: Date }): ActivityFacts {
  const s = record.summary ?? {};
  const slots = s.slots ?? 1;
  const lrmsReason = shownLrmsReason(record);
  return {
    id: record.id,
    hostname: opts.hostname,
    now: opts.now ?? new Date(),
    name: record.jobName,
    jobDescription: record.language,
    states: glueStates(record, toRestState(record)),
    restartStates: record.failedState ? restartStates(record.failedState) : undefined,
    localIdFromManager: record.localId,
    exitCode: record.exitCode,
    errors: record.failure,
    owner: record.owner,
    localOwner: record.localUser?.account,
    fqans: record.fqans,
    // GLUE2 "total" wall time is per-slot time × slots, as A-REX publishes it.
    requestedTotalWallTime: s.wallTime !== undefined ? s.wallTime * slots : undefined,
    requestedTotalCpuTime: s.cpuTime,
    requestedSlots: slots,
    requestedApplicationEnvironments: s.rtes?.length ? s.rtes : undefined,
    stdin: s.stdin,
    stdout: s.stdout,
    stderr: s.stderr,
    logDir: s.logDir,
    executionNodes: record.nodes ? record.nodes.split(",").filter(Boolean) : undefined,
    queue: record.queue,
    usedTotalWallTime: record.usedWallSeconds,
    usedTotalCpuTime: record.usedCpuSeconds,
    usedMainMemory: record.usedMemoryMB,
    submissionTime: date(record.created),
    startTime: date(record.startedAt),
    endTime: date(record.endedAt),
    workingAreaEraseTime: date(record.cleanupAt),
    proxyExpirationTime: date(record.delegationExpires),
    submissionHost: record.clientHost,
    lrmsReason,
    otherMessages: waitingForUploads(record)
      ? [awaitingMessage(record.awaiting!, record.uploadDeadline)]
      : // `arcstat -l` prints OtherMessages ("Other Messages: LRMS: JobHeldAdmin"), A-REX's form for batch-system words.
        lrmsReason
        ? [`LRMS: ${lrmsReason}`]
        : undefined,
  };
}

/** Still before the batch system, not yet past the admission wait: the upload wait is what the user should see. */
function waitingForUploads(r: ActivityRecord): boolean {
  return !!r.awaiting && (r.state === "ACCEPTED" || (r.state === "PREPARING" && !r.pending));
}

/** GLUE2 states of the state a failed job would be restarted from. */
function restartStates(state: InternalState): string[] {
  return glueStates({ state, pending: false });
}
