import { lstat } from "node:fs/promises";
import { join, normalize, sep } from "node:path";

export class UnsafePathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsafePathError";
    Object.setPrototypeOf(this, new.target.prototype);
  }
}

/**
 * Absolute path of a session-relative name. The job owns the session dir and could plant
 * symlinks (`out -> /etc`), so every existing parent must be a real directory: the JEM never
 * reads or writes through a link on the job's behalf.
 */
export async function sessionPath(root: string, name: string): Promise<string> {
  const clean = normalize(name).replace(/^\/+/, "").replace(/\/+$/, "");
  if (clean === "" || clean === "." || clean === ".." || clean.startsWith(`..${sep}`)) throw new UnsafePathError(`invalid file name: ${name}`);
  const full = join(root, clean);
  if (!full.startsWith(root.endsWith(sep) ? root : root + sep)) throw new UnsafePathError(`file name leaves the session directory: ${name}`);
  let cur = root;
  for (const part of clean.split(sep).slice(0, -1)) {
    cur = join(cur, part);
    const st = await lstat(cur).catch(() => undefined);
    if (st && !st.isDirectory()) throw new UnsafePathError(`${name}: ${part} is not a directory`);
  }
  return full;
}
