/**
 * Per-job GLUE2 ComputingActivity for the `info` bulk action (arex-rest E5.1, arex-jem §7.3,
 * decisions #17). Element order follows A-REX. Pure: the caller gathers the facts.
 */
import { type El, el, intLeaf, leaf, leaves } from "./tree.js";
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

function time(name: string, d: Date | undefined): El | undefined {
  return leaf(name, glueTimeOpt(d));
}

export function buildActivityDocument(input: ActivityInput): El {
  if (!input.states.some((s) => s.startsWith("arcrest:"))) {
    // Both ARC clients take the job state from the `arcrest:` State only.
    throw new Error(`ComputingActivity ${input.id}: states must include an "arcrest:" state`);
  }
  const shareId =
    input.computingShareId ?? (input.queue ? glueIds.share(input.hostname, input.queue) : undefined);
  const assoc = [leaf("ComputingEndpointID", input.computingEndpointId), leaf("ComputingShareID", shareId)];
  const activity = el(
    "ComputingActivity",
    [
      el("ID", glueIds.activity(input.hostname, input.id)),
      leaf("Name", input.name),
      el("OtherInfo", `SubmittedVia=${ARCREST_INTERFACE}`),
      leaves("OtherInfo", (input.fqans ?? []).map((f) => `FQAN=${f}`)),
      el("Type", "single"),
      el("IDFromEndpoint", glueIds.idFromEndpoint(input.id)),
      leaf("LocalIDFromManager", input.localIdFromManager),
      leaf("JobDescription", input.jobDescription),
      leaves("State", [...input.states]),
      leaves("RestartState", [...(input.restartStates ?? [])]),
      intLeaf("ExitCode", input.exitCode),
      leaf("ComputingManagerExitCode", input.computingManagerExitCode),
      leaves("Error", errorLines(input.errors)),
      intLeaf("WaitingPosition", input.waitingPosition),
      leaf("Owner", input.owner),
      leaf("LocalOwner", input.localOwner),
      intLeaf("RequestedTotalWallTime", input.requestedTotalWallTime),
      intLeaf("RequestedTotalCPUTime", input.requestedTotalCpuTime),
      intLeaf("RequestedSlots", input.requestedSlots),
      leaves("RequestedApplicationEnvironment", [...(input.requestedApplicationEnvironments ?? [])]),
      leaf("StdIn", input.stdin),
      leaf("StdOut", input.stdout),
      leaf("StdErr", input.stderr),
      leaf("LogDir", input.logDir),
      leaves("ExecutionNode", [...(input.executionNodes ?? [])]),
      leaf("Queue", input.queue),
      intLeaf("UsedTotalWallTime", input.usedTotalWallTime),
      intLeaf("UsedTotalCPUTime", input.usedTotalCpuTime),
      intLeaf("UsedMainMemory", input.usedMainMemory),
      time("SubmissionTime", input.submissionTime),
      time("ComputingManagerSubmissionTime", input.computingManagerSubmissionTime),
      time("StartTime", input.startTime),
      time("ComputingManagerEndTime", input.computingManagerEndTime),
      time("EndTime", input.endTime),
      time("WorkingAreaEraseTime", input.workingAreaEraseTime),
      time("ProxyExpirationTime", input.proxyExpirationTime),
      leaf("SubmissionHost", input.submissionHost),
      leaf("SubmissionClientName", input.submissionClientName),
      leaves("OtherMessages", [...(input.otherMessages ?? [])]),
      assoc.some(Boolean) ? el("Associations", assoc) : undefined,
    ],
    { BaseType: "Activity", CreationTime: glueTime(input.now), Validity: String(input.validity ?? 60) },
  );
  return { ...activity, ns: GLUE2_NS };
}
