import type { Stats } from "node:fs";
import { closeHandle, openRegular, segmentsOf, SessionFsError } from "@ce/sessionfs";

export { SessionFsError };

/**
 * A session-relative name as path segments. Every access the JEM makes on a job's behalf goes
 * through `@ce/sessionfs` with these segments: components are opened one by one relative to the
 * held parent with O_NOFOLLOW, so a link the job planted (`out -> /etc/grid-security/hostkey.pem`)
 * is refused, never followed. Empty, `.` and `..` components are refused here.
 */
export function sessionSegments(name: string): string[] {
  return segmentsOf(name);
}

/** Stat of a regular file in the session (no link followed), or undefined when missing or refused. */
export async function sessionFileStat(root: string, name: string): Promise<Stats | undefined> {
  try {
    const { handle, stat } = await openRegular(root, sessionSegments(name));
    await closeHandle(handle, name);
    return stat;
  } catch (e) {
    if (e instanceof SessionFsError) return undefined;
    throw e;
  }
}

/** A reason line for the job's `errors` file: what was refused and why. */
export function refusalText(e: unknown): string {
  if (!(e instanceof SessionFsError)) return (e as Error).message;
  return e.kind === "missing" ? e.reason : `refused ${e.reason}`;
}
