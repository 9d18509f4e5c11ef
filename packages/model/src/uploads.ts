import type { JobDescription } from "./description/types.js";

/**
 * What a job waiting for its client uploads tells the user: which files and until when. Shown in
 * the info document (`OtherMessages`) and written to `errors` (diagnose), so a user whose upload
 * never arrived learns it before the job fails, not after.
 */

/** Names shown before "and N more": a description may list thousands of inputs. */
const SHOWN = 10;

/** Session paths of the inputs the client must upload (inputs without a source URL). */
export function clientUploads(d: JobDescription): string[] {
  const out: string[] = [];
  for (const f of d.inputFiles) if (!f.source) out.push(f.name);
  return out;
}

/** A bounded, readable list: `a, b, c and 7 more`. */
export function awaitingText(names: readonly string[]): string {
  const shown = names.slice(0, SHOWN).join(", ");
  return names.length > SHOWN ? `${shown} and ${names.length - SHOWN} more` : shown;
}

/** The sentence itself; `deadline` in ms. */
export function awaitingMessage(awaiting: string, deadline: number | undefined): string {
  const until =
    deadline !== undefined && Number.isFinite(deadline)
      ? `; the job fails unless they are all uploaded by ${new Date(deadline).toISOString().replace(/\.\d{3}Z$/, "Z")}`
      : "";
  return `Waiting for client uploads: ${awaiting}${until}`;
}
