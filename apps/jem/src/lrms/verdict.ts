import { constants } from "node:os";

/**
 * Words for the way a batch job ended. The user reads this in `arcstat -l` and the info document,
 * so it must say what happened in terms of their job ("walltime exceeded"), not our plumbing
 * ("(143)"). The A-REX shape `LRMS error: (<code>) <text>` is kept because clients and people
 * grep for it.
 *
 * `cause` separates the user's mistakes (a missing executable, a payload that failed, a limit the
 * job asked for and then exceeded) from the site's (node failure, preemption, an administrator's
 * cancel, a broken runtime environment): the first are for the user to fix, the second for the
 * site, and operators filter on it.
 */
export type FailureCause = "user" | "internal";

export interface Verdict {
  text: string;
  cause: FailureCause;
}

const SIGNALS = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/** Signal number of an exit code: shells report death by signal N as 128+N, A-REX's scans as 256+N. */
export function signalOf(code: number): number | undefined {
  if (code > 128 && code < 128 + 65) return code - 128;
  if (code > 256 && code < 256 + 65) return code - 256;
  return undefined;
}

function signalName(n: number): string {
  return SIGNALS.get(n) ?? `signal ${n}`;
}

/** Texts of the job wrapper (backends/common/job-wrapper.sh) that are the user's doing. */
const USER_TEXTS = [
  /^Executable .* not found$/,
  /^Standard input file .* not found$/,
  /^(Pre|Post)-executable \d+ \(.*\) (not found|exited with code \d+, expected \d+)$/,
];
/** Verdicts of the batch system's poll (backends/<name>/poll) that are about the job's own limits. */
const LIMIT_TEXTS = [/^Walltime exceeded\b/i, /^CPU time exceeded\b/i, /^Memory exceeded\b/i];

/**
 * What a death by signal usually means, for a person who sees only the exit code: 137 and 143 are
 * the two every batch user meets and few can decode.
 */
const SIGNAL_WORDS: Record<string, string> = {
  SIGKILL:
    "killed at once: by the batch system at a limit, by the kernel when the node ran out of memory, by an administrator, or by the node going down",
  SIGTERM: "asked to stop: by the batch system at a limit or on a cancel, or by the node shutting down",
  SIGINT: "interrupted",
  SIGSEGV: "the program crashed (segmentation fault)",
  SIGABRT: "the program aborted itself",
  SIGBUS: "the program crashed (bus error)",
  SIGFPE: "the program crashed (arithmetic error)",
};

/** `Job was killed by SIGKILL (exit code 137 = 128 + 9): …` */
function signalText(code: number, name: string, sig: number | undefined): string {
  const how = sig !== undefined && code > 128 ? ` (exit code ${code} = ${code > 256 ? 256 : 128} + ${sig})` : "";
  const words = SIGNAL_WORDS[name];
  return `Job was killed by ${name}${how}${words ? `: ${words}` : ""}`;
}

/** Figures of a job's end the verdict can name (from the batch system's usage and the description). */
export interface EndFigures {
  usedMemoryMB?: number | undefined;
  requestedMemoryMB?: number | undefined;
}

/** `; it used 69 MB and asked for 64 MB`, or nothing when neither figure is known. */
function memoryFigures(f: EndFigures): string {
  const used = f.usedMemoryMB !== undefined && Number.isFinite(f.usedMemoryMB) ? `used ${Math.round(f.usedMemoryMB)} MB` : "";
  const asked =
    f.requestedMemoryMB !== undefined && Number.isFinite(f.requestedMemoryMB) ? `asked for ${Math.round(f.requestedMemoryMB)} MB` : "";
  if (!used && !asked) return "";
  return `; it ${[used, asked].filter(Boolean).join(" and ")}`;
}

/** A termination by signal as the wrapper reports it: the batch system may know why. */
export function isSignalEnd(code: number, message: string): boolean {
  return signalOf(code) !== undefined || /^Job was terminated by SIG/.test(message);
}

/**
 * The failure text and cause for a batch job that ended with `code` and the wrapper's or batch
 * system's `message` (the `lrms_done` line). Codes and signals with no message get words.
 */
export function describeEnd(code: number, message: string, figures: EndFigures = {}): Verdict {
  let msg = message.trim();
  // A memory kill with the figures a person needs to pick the next request (`(memory=…)`).
  if (/^Memory exceeded\b/i.test(msg)) msg += memoryFigures(figures);
  const sig = signalOf(code);
  const fromSig = /^Job was terminated by SIG([A-Z0-9]+)/.exec(msg)?.[1];
  const name = fromSig ? `SIG${fromSig}` : sig !== undefined ? signalName(sig) : undefined;
  if (name === "SIGXCPU") {
    return { text: `LRMS error: (${code}) CPU time exceeded: the job used all the CPU time it asked for (${name})`, cause: "user" };
  }
  if (LIMIT_TEXTS.some((r) => r.test(msg)) || USER_TEXTS.some((r) => r.test(msg))) {
    return { text: `LRMS error: (${code}) ${msg}`, cause: "user" };
  }
  // Anything else the wrapper or the batch system says (a runtime environment that failed, a
  // cancel the CE did not ask for, a signal from outside) is the site's to look at.
  // The wrapper's bare "Job was terminated by SIGKILL" gets the same words as a bare 137.
  if (name && /^Job was terminated by SIG[A-Z0-9]+$/.test(msg))
    return { text: `LRMS error: (${code}) ${signalText(code, name, sig)}`, cause: "internal" };
  if (msg !== "") return { text: `LRMS error: (${code}) ${msg}`, cause: "internal" };
  if (name) return { text: `LRMS error: (${code}) ${signalText(code, name, sig)}`, cause: "internal" };
  if (code < 0)
    return { text: `LRMS error: (${code}) Job ended for an unknown reason (no exit code from the batch system)`, cause: "internal" };
  return { text: `LRMS error: (${code}) The executable exited with code ${code}`, cause: "user" };
}
