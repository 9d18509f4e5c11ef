import type { InternalState } from "./states.js";

/*
 * Texts for people (the pages, ceadm): a failure with its cause first and what to do next, state
 * names in words, figures rounded. Programs keep the record's own text: the `failed` control file,
 * the info document's `Error` and `arcstat -l` carry A-REX's `LRMS error: (<code>) <text>` shape
 * (docs/decisions.md, "LRMS error: kept where clients read it").
 */

/** The one name of the bucket of jobs without VOMS or token groups, wherever a person reads it. */
export const NO_VO = "(no VO)";

/** A-REX's prefix of a batch-system failure; the code it carries is said in words by the rest. */
const LRMS_PREFIX = /^LRMS error: \((-?\d+)\)\s*/;

export interface FailureWords {
  /** What happened, in words, first: `The executable exited with code 3`. */
  cause: string;
  /** What the person can do about it, when we know; plain text (may name description attributes). */
  advice?: string | undefined;
}

/** Facts of the job a failure text can be completed with. */
export interface FailureFacts {
  usedMemoryMB?: number | undefined;
  requestedMemoryMB?: number | undefined;
  wallTimeSeconds?: number | undefined;
}

/**
 * A recorded failure (`JobRecord.failure`) as a person reads it: without the `LRMS error: (N)`
 * prefix, with the memory figures when the text lacks them, and a sentence on what to do.
 */
export function failureWords(text: string, facts: FailureFacts = {}): FailureWords {
  let cause = text.trim().replace(LRMS_PREFIX, "") || "The job failed; the CE recorded no reason";
  const mb = (n: number | undefined) => (n !== undefined && Number.isFinite(n) && n > 0 ? Math.round(n) : undefined);
  const used = mb(facts.usedMemoryMB);
  const asked = mb(facts.requestedMemoryMB);
  if (/^Memory exceeded\b/i.test(cause)) {
    // Texts written before the JEM added the figures (or a batch system that gave none).
    if (!/\d+ MB/.test(cause) && (used !== undefined || asked !== undefined)) {
      const parts = [used !== undefined ? `used ${used} MB` : "", asked !== undefined ? `asked for ${asked} MB` : ""].filter(Boolean);
      cause += `; it ${parts.join(" and ")}`;
    }
    const next = used !== undefined ? Math.ceil((used * 1.25) / 64) * 64 : undefined;
    return {
      cause,
      advice: `Ask for more memory${next !== undefined ? `, for example ${next} MB` : ""}: (memory=${next ?? "<MB>"}) in xRSL, <IndividualPhysicalMemory> (bytes) in ADL.`,
    };
  }
  if (/^Walltime exceeded\b/i.test(cause))
    return { cause, advice: "Ask for more time: (walltime=<minutes>) in xRSL, <IndividualWallTime> (seconds) in ADL." };
  if (/^CPU time exceeded\b/i.test(cause))
    return { cause, advice: "Ask for more CPU time: (cputime=<minutes>) in xRSL, <IndividualCPUTime> (seconds) in ADL." };
  if (/^(Executable|Standard input file) .* not found$/.test(cause) || /^(Pre|Post)-executable \d+ \(.*\) not found$/.test(cause))
    return { cause, advice: "Check the path in the description: a program in the session directory must be one of the job's input files." };
  if (/^The executable exited with code \d+$/.test(cause) || /^(Pre|Post)-executable .* exited with code/.test(cause))
    return { cause, advice: "The program itself reported the failure: its standard error usually says why." };
  if (/^Job was killed by SIG/.test(cause))
    return {
      cause,
      advice:
        "If the job did not reach a limit it asked for, ask the site (node or batch-system problem), then Restart or submit it again.",
    };
  if (/^(Node failure|Preempted|Cancelled in the batch system)\b/i.test(cause))
    return { cause, advice: "This was not caused by the job: Restart it or submit it again." };
  if (/^User file: .* - Timeout waiting for upload$/.test(cause))
    return {
      cause,
      advice:
        "An input file the client had to upload did not arrive before the deadline: submit again and let the client upload it (arcsub does).",
    };
  if (/^Failed in data staging:/.test(cause))
    return {
      cause,
      advice:
        "An input or output URL was refused or unreachable: check the URL, that the file exists, and that your proxy may read or write it.",
    };
  if (/^Job is canceled by external request$/.test(cause)) return { cause: "The job was killed on request" };
  return { cause };
}

/** Internal state names (the `errors` file, `status`) as people say them. */
const STATE_WORDS: Record<InternalState, string> = {
  ACCEPTED: "accepted",
  PREPARING: "fetching inputs",
  SUBMIT: "submitting to the batch system",
  INLRMS: "in the batch system",
  FINISHING: "delivering outputs",
  FINISHED: "finished",
  CANCELING: "being killed",
  DELETED: "removed",
};

/**
 * `PREPARING` → `fetching inputs`; `PENDING:PREPARING` → `waiting to fetch inputs`. `FINISHED`
 * with the reason of the move (`Job failed`, `Job was killed`) says how it ended: a job that failed
 * did not "finish" for the person who reads the history. Unknown names are returned as they are.
 */
export function stateInWords(name: string, reason = ""): string {
  const pending = name.startsWith("PENDING:");
  const bare = pending ? name.slice("PENDING:".length) : name;
  const words = (STATE_WORDS as Record<string, string | undefined>)[bare];
  if (words === undefined) return name;
  if (bare === "FINISHED" && !pending) {
    if (/^Job failed\b/i.test(reason)) return "failed";
    if (/^Job was killed\b/i.test(reason)) return "killed";
  }
  return pending ? `waiting (${words})` : words;
}

/** A duration for people: `0.07 s`, `12 s`, `3 min 20 s`, `2 h 5 min`. */
export function secondsInWords(s: number): string {
  if (!Number.isFinite(s) || s < 0) return "";
  if (s < 10) return `${Number(s.toFixed(2))} s`;
  if (s < 90) return `${Math.round(s)} s`;
  const total = Math.round(s);
  if (total < 3600) return `${Math.floor(total / 60)} min ${total % 60} s`;
  const h = Math.floor(total / 3600);
  const m = Math.round((total % 3600) / 60);
  return m ? `${h} h ${m} min` : `${h} h`;
}

/** Bytes for people in binary units: `512 B`, `1.5 KiB`, `23 MiB`. */
export function bytesInWords(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "";
  if (n < 1024) return `${Math.round(n)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
