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

/** A termination by signal as the wrapper reports it: the batch system may know why. */
export function isSignalEnd(code: number, message: string): boolean {
  return signalOf(code) !== undefined || /^Job was terminated by SIG/.test(message);
}

/**
 * The failure text and cause for a batch job that ended with `code` and the wrapper's or batch
 * system's `message` (the `lrms_done` line). Codes and signals with no message get words.
 */
export function describeEnd(code: number, message: string): Verdict {
  const msg = message.trim();
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
  if (msg !== "") return { text: `LRMS error: (${code}) ${msg}`, cause: "internal" };
  if (name) return { text: `LRMS error: (${code}) Job was killed by ${name}`, cause: "internal" };
  if (code < 0)
    return { text: `LRMS error: (${code}) Job ended for an unknown reason (no exit code from the batch system)`, cause: "internal" };
  return { text: `LRMS error: (${code}) The executable exited with code ${code}`, cause: "user" };
}
