import { SessionFsError } from "@ce/sessionfs";
import { DestinationRefused } from "./destinations.js";
import { TransferError } from "./http.js";

/**
 * Whose a failed transfer is. The user's: a URL that names nothing (4xx), a destination the site
 * does not allow, a protocol or credential that cannot be used, data that does not match the
 * checksum or size the description declares, an output the job did not produce or left as a link.
 * The site's (`internal`): storage or network trouble that outlasted the retries, anything else.
 * `failedCause` carries it, so a user knows what to fix and an operator what to look at.
 */
export type Blame = "user" | "internal";

export function blameOf(e: unknown): Blame {
  if (e instanceof SessionFsError || e instanceof DestinationRefused) return "user";
  if (e instanceof TransferError) {
    if (e.status !== undefined) return e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429 ? "user" : "internal";
    // Refused before or after sending (protocol, credential, checksum, size): never retried.
    return e.retryable ? "internal" : "user";
  }
  return "internal";
}

/** The cause of a set of failures: the user's only when every one of them is. */
export function blameAll(all: readonly Blame[]): Blame {
  return all.length > 0 && all.every((b) => b === "user") ? "user" : "internal";
}

/** `stagein.failed`: JSON `{ text, cause }` (a plain text, as older JEMs wrote it, is the site's). */
export function parseStageInFailure(raw: string | undefined): { text: string; cause: Blame } | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  try {
    const v = JSON.parse(raw) as { text?: unknown; cause?: unknown };
    if (typeof v.text === "string") return { text: v.text, cause: v.cause === "user" ? "user" : "internal" };
  } catch {
    // plain text below
  }
  return { text: raw.trim(), cause: "internal" };
}
