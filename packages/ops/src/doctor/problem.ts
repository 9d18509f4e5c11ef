/**
 * One thing `ceadm doctor` (and the gateway and JEM at start) found wrong: which check, what is
 * wrong in words that name the file, directory or account, and the fix an operator types.
 * `fatal`: the CE cannot run safely or at all with it (a start stops with this message);
 * `warning`: something degrades or will soon (a start logs it and goes on).
 */
export interface Problem {
  check: Check;
  severity: "fatal" | "warning";
  message: string;
  fix: string;
  /**
   * false: left out of the start-up checks, because the process's own start already stops on it in
   * its own words (a certificate file it cannot open, say).
   */
  atStart?: false;
}

export type Check = "config" | "host-cert" | "ca-dir" | "vomsdir" | "redis" | "directories" | "accounts" | "batch" | "clock" | "disk";

/** The one line a problem is reported as, in `ceadm doctor` and in a refused start alike. */
export function problemLine(p: Problem): string {
  return `${p.check}: ${p.message}; fix: ${p.fix}`;
}

export const fatal = (check: Check, message: string, fix: string): Problem => ({ check, severity: "fatal", message, fix });
/** A problem the gateway's or JEM's own start reports itself (see `atStart`). */
export const reportedByStart = (p: Problem): Problem => ({ ...p, atStart: false });
export const warning = (check: Check, message: string, fix: string): Problem => ({ check, severity: "warning", message, fix });

/** `0755` style. */
export const octal = (mode: number) => `0${(mode & 0o7777).toString(8).padStart(3, "0")}`;
