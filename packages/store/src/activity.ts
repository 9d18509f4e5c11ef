import { glueStates, toRestState, type InternalState } from "@ce/model";
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
  name?: string;
  jobDescription?: string;
  states: string[];
  restartStates?: string[];
  localIdFromManager?: string;
  exitCode?: number;
  errors?: string;
  owner?: string;
  /** The mapped local account (GLUE2 LocalOwner). */
  localOwner?: string;
  fqans?: readonly string[];
  requestedTotalWallTime?: number;
  requestedTotalCpuTime?: number;
  requestedSlots?: number;
  requestedApplicationEnvironments?: string[];
  stdin?: string;
  stdout?: string;
  stderr?: string;
  logDir?: string;
  executionNodes?: string[];
  queue?: string;
  usedTotalWallTime?: number;
  usedTotalCpuTime?: number;
  usedMainMemory?: number;
  submissionTime?: Date;
  startTime?: Date;
  endTime?: Date;
  workingAreaEraseTime?: Date;
  proxyExpirationTime?: Date;
  submissionHost?: string;
}

const date = (ms: number | undefined) => (ms !== undefined && Number.isFinite(ms) && ms > 0 ? new Date(ms) : undefined);

/** Drops undefined members (exactOptionalPropertyTypes-safe and keeps the document lean). A copy,
 * not `delete`: deleting turns the object into a slow dictionary (bulk info builds one per job). */
function compact<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const k in o) if (o[k] !== undefined) out[k] = o[k];
  return out as T;
}

export function activityInputFor(record: JobRecord, opts: { hostname: string; now?: Date }): ActivityFacts {
  const s = record.summary ?? {};
  const slots = s.slots ?? 1;
  const restart = record.failedState ? restartStates(record.failedState) : undefined;
  return compact<ActivityFacts>({
    id: record.id,
    hostname: opts.hostname,
    now: opts.now ?? new Date(),
    name: record.jobName,
    jobDescription: record.language,
    states: glueStates(record, toRestState(record)),
    restartStates: restart,
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
  });
}

/** GLUE2 states of the state a failed job would be restarted from. */
function restartStates(state: InternalState): string[] {
  return glueStates({ state, pending: false });
}
