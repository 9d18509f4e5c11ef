/**
 * Per-job GLUE2 ComputingActivity for the `info` bulk action (arex-rest E5.1, arex-jem §7.3,
 * decisions #17). Element order follows A-REX. Pure: the caller gathers the facts.
 */
import type { El } from "./tree.js";
import { ARCREST_INTERFACE, GLUE2_NS, glueIds, glueTime, glueTimeOpt } from "./glue.js";

export interface ActivityInput {
  /** Job id (opaque). */
  id: string;
  /** Head-node host name used in the `urn:caid:` ID and the share ID. */
  hostname: string;
  /** Document time (CreationTime attribute). */
  now: Date;
  /** GLUE2 Validity seconds (default 60: the document is generated on request). */
  validity?: number;
  name?: string;
  /** `nordugrid:xrsl` | `emies:adl`. */
  jobDescription?: string;
  /** Prefixed GLUE2 states (e.g. @ce/model glueStates()); one MUST be `arcrest:<REST state>`. */
  states: readonly string[];
  /** Prefixed states of the failed state (restart point). */
  restartStates?: readonly string[];
  /** Batch-system job id. */
  localIdFromManager?: string;
  exitCode?: number;
  computingManagerExitCode?: string | number;
  /** Failure text; one `Error` element per non-empty line. */
  errors?: string | readonly string[];
  waitingPosition?: number;
  /** Grid identity (DN or token `iss/sub`). */
  owner?: string;
  localOwner?: string;
  /** VOMS FQANs / token groups at submission, primary first: published as `OtherInfo: FQAN=…`. */
  fqans?: readonly string[];
  /** Seconds. */
  requestedTotalWallTime?: number;
  /** Seconds. */
  requestedTotalCpuTime?: number;
  requestedSlots?: number;
  requestedApplicationEnvironments?: readonly string[];
  stdin?: string;
  stdout?: string;
  stderr?: string;
  logDir?: string;
  executionNodes?: readonly string[];
  queue?: string;
  /** Seconds. */
  usedTotalWallTime?: number;
  /** Seconds. */
  usedTotalCpuTime?: number;
  /** MB. */
  usedMainMemory?: number;
  submissionTime?: Date;
  computingManagerSubmissionTime?: Date;
  startTime?: Date;
  computingManagerEndTime?: Date;
  endTime?: Date;
  workingAreaEraseTime?: Date;
  proxyExpirationTime?: Date;
  submissionHost?: string;
  submissionClientName?: string;
  otherMessages?: readonly string[];
  /** Defaults to the share ID of `queue` (same form as the info document), when a queue is known. */
  computingShareId?: string;
  computingEndpointId?: string;
}

// A-REX keeps at most 1 KiB of the failure text; longer texts only bloat every bulk answer.
const MAX_ERROR_CHARS = 1024;

function errorLines(errors: string | readonly string[] | undefined): string[] {
  if (errors === undefined) return [];
  const text = typeof errors === "string" ? errors : errors.join("\n");
  return text
    .slice(0, MAX_ERROR_CHARS)
    .split(/\r?\n/)
    .map((l) => l.trimEnd())
    .filter((l) => l !== "");
}

/**
 * Children pushed straight into one array: the same elements `el`/`leaf`/`leaves`/`intLeaf` make,
 * without their intermediate arrays and the flattening (bulk info builds one document per job).
 */
class Children {
  readonly list: El[] = [];
  /** `el(name, value)`. */
  el(name: string, value: string): void {
    this.list.push({ name, text: value });
  }
  /** `leaf(name, value)`: nothing for an absent or empty value. */
  leaf(name: string, value: string | number | null | undefined): void {
    if (value !== undefined && value !== null && value !== "") this.list.push({ name, text: String(value) });
  }
  /** `leaves(name, values)`. */
  leaves(name: string, values: readonly (string | null | undefined)[] | undefined): void {
    if (values) for (const v of values) this.leaf(name, v);
  }
  /** `intLeaf(name, value)`: whole numbers only (pyarcrest int()s them). */
  int(name: string, value: number | null | undefined): void {
    if (value !== undefined && value !== null && Number.isFinite(value)) this.list.push({ name, text: String(Math.round(value)) });
  }
  time(name: string, d: Date | undefined): void {
    this.leaf(name, glueTimeOpt(d));
  }
}

export function buildActivityDocument(input: ActivityInput): El {
  if (!input.states.some((s) => s.startsWith("arcrest:"))) {
    // Both ARC clients take the job state from the `arcrest:` State only.
    throw new Error(`ComputingActivity ${input.id}: states must include an "arcrest:" state`);
  }
  const shareId =
    input.computingShareId ?? (input.queue ? glueIds.share(input.hostname, input.queue) : undefined);
  const c = new Children();
  c.el("ID", glueIds.activity(input.hostname, input.id));
  c.leaf("Name", input.name);
  c.el("OtherInfo", `SubmittedVia=${ARCREST_INTERFACE}`);
  if (input.fqans) for (const f of input.fqans) c.leaf("OtherInfo", `FQAN=${f}`);
  c.el("Type", "single");
  c.el("IDFromEndpoint", glueIds.idFromEndpoint(input.id));
  c.leaf("LocalIDFromManager", input.localIdFromManager);
  c.leaf("JobDescription", input.jobDescription);
  c.leaves("State", input.states);
  c.leaves("RestartState", input.restartStates);
  c.int("ExitCode", input.exitCode);
  c.leaf("ComputingManagerExitCode", input.computingManagerExitCode);
  c.leaves("Error", errorLines(input.errors));
  c.int("WaitingPosition", input.waitingPosition);
  c.leaf("Owner", input.owner);
  c.leaf("LocalOwner", input.localOwner);
  c.int("RequestedTotalWallTime", input.requestedTotalWallTime);
  c.int("RequestedTotalCPUTime", input.requestedTotalCpuTime);
  c.int("RequestedSlots", input.requestedSlots);
  c.leaves("RequestedApplicationEnvironment", input.requestedApplicationEnvironments);
  c.leaf("StdIn", input.stdin);
  c.leaf("StdOut", input.stdout);
  c.leaf("StdErr", input.stderr);
  c.leaf("LogDir", input.logDir);
  c.leaves("ExecutionNode", input.executionNodes);
  c.leaf("Queue", input.queue);
  c.int("UsedTotalWallTime", input.usedTotalWallTime);
  c.int("UsedTotalCPUTime", input.usedTotalCpuTime);
  c.int("UsedMainMemory", input.usedMainMemory);
  c.time("SubmissionTime", input.submissionTime);
  c.time("ComputingManagerSubmissionTime", input.computingManagerSubmissionTime);
  c.time("StartTime", input.startTime);
  c.time("ComputingManagerEndTime", input.computingManagerEndTime);
  c.time("EndTime", input.endTime);
  c.time("WorkingAreaEraseTime", input.workingAreaEraseTime);
  c.time("ProxyExpirationTime", input.proxyExpirationTime);
  c.leaf("SubmissionHost", input.submissionHost);
  c.leaf("SubmissionClientName", input.submissionClientName);
  c.leaves("OtherMessages", input.otherMessages);
  const assoc = new Children();
  assoc.leaf("ComputingEndpointID", input.computingEndpointId);
  assoc.leaf("ComputingShareID", shareId);
  if (assoc.list.length > 0) c.list.push({ name: "Associations", children: assoc.list });
  return {
    name: "ComputingActivity",
    children: c.list,
    attrs: { BaseType: "Activity", CreationTime: glueTime(input.now), Validity: String(input.validity ?? 60) },
    ns: GLUE2_NS,
  };
}
