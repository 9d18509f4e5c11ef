/**
 * Inputs from a site-shared read-only software area (`staging.localInputPrefixes`, e.g. `/cvmfs`):
 * linked into the session, the way A-REX's `linkurl` does. The JEM never reads the file as root;
 * the job opens it on the node with its own rights. The prefix is checked again here (the
 * gateway checked it at submission) so a description stored under another configuration cannot
 * name anything else.
 */
import { stat, symlink } from "node:fs/promises";
import { checkLocalInput, localSourcePath } from "@ce/model";
import { TransferError } from "../http.js";
import type { SessionDest } from "../http.js";

export async function linkLocalInput(source: string, dest: SessionDest, prefixes: readonly string[]): Promise<number> {
  const path = localSourcePath(source) ?? "";
  const r = checkLocalInput(path, prefixes);
  if ("reason" in r) throw new TransferError(`local input ${path || source} ${r.reason}`, false);
  // Existence only (the answer reveals no content): a missing file fails now, not in the batch job.
  const st = await stat(r.path).catch((e: NodeJS.ErrnoException) => {
    throw new TransferError(`local input ${r.path}: ${e.code === "ENOENT" ? "no such file" : (e.code ?? e.message)}`, false);
  });
  if (!st.isFile()) throw new TransferError(`local input ${r.path} is not a regular file`, false);
  await symlink(r.path, dest.dir.at(dest.name)).catch((e: NodeJS.ErrnoException) => {
    throw new TransferError(`linking ${r.path} into the session as ${dest.at}: ${e.code ?? e.message}`, false);
  });
  return st.size;
}
