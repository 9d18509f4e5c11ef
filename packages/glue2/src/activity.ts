/**
 * Per-job GLUE2 ComputingActivity for the `info` bulk action (docs/interface.md E5,
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
  validity?: number | undefined;
  name?: string | undefined;
  /** `nordugrid:xrsl` | `emies:adl`. */
  jobDescription?: string | undefined;
  /** Prefixed GLUE2 states (e.g. @ce/model glueStates()); one MUST be `arcrest:<REST state>`. */
  states: readonly string[];
  /** Prefixed states of the failed state (restart point). */
  restartStates?: readonly string[] | undefined;
  /** Batch-system job id. */
  localIdFromManager?: string | undefined;
  exitCode?: number | undefined;
  computingManagerExitCode?: string | number | undefined;
  /** Failure text; one `Error` element per non-empty line. */
  errors?: string | readonly string[] | undefined;
  waitingPosition?: number | undefined;
  /** Grid identity (DN or token `iss/sub`). */
  owner?: string | undefined;
  localOwner?: string | undefined;
  /** VOMS FQANs / token groups at submission, primary first: published as `OtherInfo: FQAN=…`. */
  fqans?: readonly string[] | undefined;
  /**
   * Why the job waits in the batch system, as the batch system states it: published as
   * `OtherInfo: LRMSReason=…` (machine-readable; the caller also puts `LRMS: …` into OtherMessages,
   * which `arcstat -l` prints). docs/interface.md, "The batch system's reason".
   */
  lrmsReason?: string | undefined;
  /** Seconds. */
  requestedTotalWallTime?: number | undefined;
  /** Seconds. */
  requestedTotalCpuTime?: number | undefined;
  requestedSlots?: number | undefined;
  requestedApplicationEnvironments?: readonly string[] | undefined;
  stdin?: string | undefined;
  stdout?: string | undefined;
  stderr?: string | undefined;
  logDir?: string | undefined;
  executionNodes?: readonly string[] | undefined;
  queue?: string | undefined;
  /** Seconds. */
  usedTotalWallTime?: number | undefined;
  /** Seconds. */
  usedTotalCpuTime?: number | undefined;
  /** MB. */
  usedMainMemory?: number | undefined;
  submissionTime?: Date | undefined;
  computingManagerSubmissionTime?: Date | undefined;
  startTime?: Date | undefined;
  computingManagerEndTime?: Date | undefined;
  endTime?: Date | undefined;
  workingAreaEraseTime?: Date | undefined;
  proxyExpirationTime?: Date | undefined;
  submissionHost?: string | undefined;
  submissionClientName?: string | undefined;
  otherMessages?: readonly string[] | undefined;
  /** Defaults to the share ID of `queue` (same form as the info document), when a queue is known. */
  computingShareId?: string | undefined;
  computingEndpointId?: string | undefined;
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
 * Where the walk puts a ComputingActivity's children: the element tree (buildActivityDocument) or
 * the XML/JSON text straight away (activity-text.ts, bulk info: 100 documents per request).
 */
export interface ActivitySink {
  /** One leaf element, in document order; elements of one name always come in one run. */
  el(name: string, text: string): void;
  /** The Associations element last: its two leaves, each absent when undefined or empty. */
  associations(endpointId: string | undefined, shareId: string | undefined): void;
}

/**
 * The children of one ComputingActivity in A-REX order, into `sink`: every renderer goes through
 * this one walk, so the tree and the direct texts cannot drift apart. Throws without an
 * `arcrest:` state (both ARC clients take the job state from that State only).
 */
export function walkActivity(input: ActivityInput, sink: ActivitySink): void {
  if (!input.states.some((s) => s.startsWith("arcrest:"))) {
    throw new Error(`ComputingActivity ${input.id}: states must include an "arcrest:" state`);
  }
  // `leaf`: nothing for an absent or empty value; `int`: whole numbers only (pyarcrest int()s them).
  const leaf = (name: string, value: string | number | null | undefined) => {
    if (value !== undefined && value !== null && value !== "") sink.el(name, String(value));
  };
  const leaves = (name: string, values: readonly (string | null | undefined)[] | undefined) => {
    if (values) for (const v of values) leaf(name, v);
  };
  const int = (name: string, value: number | null | undefined) => {
    if (value !== undefined && value !== null && Number.isFinite(value)) sink.el(name, String(Math.round(value)));
  };
  const time = (name: string, d: Date | undefined) => leaf(name, glueTimeOpt(d));
  sink.el("ID", glueIds.activity(input.hostname, input.id));
  leaf("Name", input.name);
  sink.el("OtherInfo", `SubmittedVia=${ARCREST_INTERFACE}`);
  if (input.fqans) for (const f of input.fqans) leaf("OtherInfo", `FQAN=${f}`);
  if (input.lrmsReason) leaf("OtherInfo", `LRMSReason=${input.lrmsReason}`);
  sink.el("Type", "single");
  sink.el("IDFromEndpoint", glueIds.idFromEndpoint(input.id));
  leaf("LocalIDFromManager", input.localIdFromManager);
  leaf("JobDescription", input.jobDescription);
  leaves("State", input.states);
  leaves("RestartState", input.restartStates);
  int("ExitCode", input.exitCode);
  leaf("ComputingManagerExitCode", input.computingManagerExitCode);
  leaves("Error", errorLines(input.errors));
  int("WaitingPosition", input.waitingPosition);
  leaf("Owner", input.owner);
  leaf("LocalOwner", input.localOwner);
  int("RequestedTotalWallTime", input.requestedTotalWallTime);
  int("RequestedTotalCPUTime", input.requestedTotalCpuTime);
  int("RequestedSlots", input.requestedSlots);
  leaves("RequestedApplicationEnvironment", input.requestedApplicationEnvironments);
  leaf("StdIn", input.stdin);
  leaf("StdOut", input.stdout);
  leaf("StdErr", input.stderr);
  leaf("LogDir", input.logDir);
  leaves("ExecutionNode", input.executionNodes);
  leaf("Queue", input.queue);
  int("UsedTotalWallTime", input.usedTotalWallTime);
  int("UsedTotalCPUTime", input.usedTotalCpuTime);
  int("UsedMainMemory", input.usedMainMemory);
  time("SubmissionTime", input.submissionTime);
  time("ComputingManagerSubmissionTime", input.computingManagerSubmissionTime);
  time("StartTime", input.startTime);
  time("ComputingManagerEndTime", input.computingManagerEndTime);
  time("EndTime", input.endTime);
  time("WorkingAreaEraseTime", input.workingAreaEraseTime);
  time("ProxyExpirationTime", input.proxyExpirationTime);
  leaf("SubmissionHost", input.submissionHost);
  leaf("SubmissionClientName", input.submissionClientName);
  leaves("OtherMessages", input.otherMessages);
  const shareId = input.computingShareId ?? (input.queue ? glueIds.share(input.hostname, input.queue) : undefined);
  sink.associations(input.computingEndpointId, shareId);
}

/** The attributes of a ComputingActivity, in order. */
export function activityAttrs(input: ActivityInput): { BaseType: string; CreationTime: string; Validity: string } {
  return { BaseType: "Activity", CreationTime: glueTime(input.now), Validity: String(input.validity ?? 60) };
}

/** Children pushed straight into one array (bulk info builds one document per job). */
class TreeSink implements ActivitySink {
  readonly list: El[] = [];
  el(name: string, text: string): void {
    this.list.push({ name, text });
  }
  associations(endpointId: string | undefined, shareId: string | undefined): void {
    const assoc: El[] = [];
    if (endpointId) assoc.push({ name: "ComputingEndpointID", text: endpointId });
    if (shareId) assoc.push({ name: "ComputingShareID", text: shareId });
    if (assoc.length > 0) this.list.push({ name: "Associations", children: assoc });
  }
}

export function buildActivityDocument(input: ActivityInput): El {
  const c = new TreeSink();
  walkActivity(input, c);
  return { name: "ComputingActivity", children: c.list, attrs: activityAttrs(input), ns: GLUE2_NS };
}
