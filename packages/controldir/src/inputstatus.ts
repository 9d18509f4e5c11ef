import { Failure } from "@ce/model";
import type { ControlDir } from "./controldir.js";

/**
 * `input_status`: which inputs are present in the session directory; absent until the first line
 * (a new job has none, and an absent file reads as empty). Two processes write it —
 * the gateway (a completed client upload) and the JEM (a finished download; a restart that must
 * fetch a purged download again) — so it is APPEND-ONLY: every writer adds whole lines with one
 * O_APPEND write, nobody ever replaces the file (`ControlDir.write` refuses it). A record a gateway
 * appends while the JEM restarts the job therefore cannot be lost, which a read-modify-rename
 * rewrite did lose. Lines, later ones winning:
 *
 *   `/<path>`   the input is present (upload completed, or download done)
 *   `-/<path>`  the input is gone again (restart: the download was purged at FINISHING)
 *   `/`         free-stage-in confirmation
 */

/** A path that cannot be one line of `input_status` (empty, or with a line break). */
export class InputStatusPathError extends Failure<"INPUT_STATUS_PATH"> {
  constructor(path: string) {
    super("INPUT_STATUS_PATH", `not a session path for input_status: ${JSON.stringify(path).slice(0, 120)}`);
  }
}

export interface InputStatus {
  /** Session-relative paths (no leading `/`) present now. */
  paths: Set<string>;
  /** The free-stage-in confirmation (`/` line) was given. */
  complete: boolean;
}

function line(prefix: "" | "-", path: string): string {
  const rel = path.replace(/^\/+/, "");
  if (!rel || /[\r\n]/.test(rel) || rel.trim() !== rel) throw new InputStatusPathError(path);
  return `${prefix}/${rel}\n`;
}

/** Records inputs as present (session paths, with or without the leading `/`): one append. */
export async function appendInputs(control: ControlDir, id: string, paths: readonly string[]): Promise<void> {
  if (paths.length === 0) return;
  await control.append(id, "input_status", paths.map((p) => line("", p)).join(""));
}

/** Records inputs as gone again (JEM restart): one append, never a rewrite. */
export async function forgetInputs(control: ControlDir, id: string, paths: readonly string[]): Promise<void> {
  if (paths.length === 0) return;
  await control.append(id, "input_status", paths.map((p) => line("-", p)).join(""));
}

export function parseInputStatus(text: string): InputStatus {
  const paths = new Set<string>();
  let complete = false;
  for (const raw of text.split("\n")) {
    const l = raw.trim();
    if (l === "/") complete = true;
    else if (l.startsWith("-/")) paths.delete(l.slice(1).replace(/^\/+/, ""));
    else if (l) paths.add(l.replace(/^\/+/, ""));
  }
  return { paths, complete };
}

export async function readInputStatus(control: ControlDir, id: string): Promise<InputStatus> {
  return parseInputStatus((await control.read(id, "input_status")) ?? "");
}
