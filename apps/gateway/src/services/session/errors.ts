import { BadRequest, CeError, Forbidden, NotFound } from "../../errors.js";
import { SessionFsError } from "./fs.js";

export class Conflict extends CeError {
  constructor(message: string) {
    super(409, "CONFLICT", message);
  }
}

/** Filesystem refusals → HTTP. Reading: everything that is not a plain file/dir is simply not found. */
export function fsError(e: unknown, op: "read" | "write" | "delete"): never {
  if (!(e instanceof SessionFsError)) throw e;
  if (e.kind === "too-long") throw new BadRequest("Invalid session path: path too long", "BAD_PATH");
  // A job may chmod its own files away from the CE group: that is the owner's choice, said plainly.
  if (e.kind === "denied")
    throw new Forbidden(`Permission denied: ${e.at} is not accessible to the CE (the job changed its permissions)`, "SESSION_DENIED");
  if (e.kind === "missing" && e.at === "/" && op === "write") {
    // Recreated by the CE it would not be the mapped account's (owner, mode): it stays deleted.
    throw new CeError(409, "SESSION_DELETED", "The session directory of this job was deleted; it is not recreated");
  }
  if (e.kind === "missing" || op !== "write") throw new NotFound("Not found");
  switch (e.kind) {
    case "symlink":
      throw new Conflict(`Cannot write ${e.at}: it is or passes through a symbolic link, which is never followed`);
    case "not-dir":
      throw new Conflict(`Cannot write: ${e.at} exists and is not a directory`);
    case "is-dir":
      throw new Conflict(`Cannot write ${e.at}: it is a directory; PUT stores files only`);
    default:
      throw new Conflict(`Cannot write ${e.at}: not a regular file`);
  }
}
