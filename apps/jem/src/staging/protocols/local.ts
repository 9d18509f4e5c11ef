/**
 * Inputs from a site-shared read-only software area (`staging.localInputPrefixes`, e.g. `/cvmfs`):
 * linked into the session, the way A-REX's `linkurl` does. The JEM never reads the file as root;
 * the job opens it on the node with its own rights. The prefix is checked again here (the
 * gateway checked it at submission) so a description stored under another configuration cannot
 * name anything else.
 *
 * A software area has symbolic links of its own (`latest -> 1.2.3`, one CVMFS repository naming
 * another), and whoever can write into it (a VO's software manager on a non-CVMFS area) can add
 * one to `/root/...`. Root's answer (exists, is a file, its size) must not reach through such a
 * link: the path is resolved, the result must lie inside a listed area (each resolved too), and
 * the object is then pinned by a descriptor (O_PATH: no read access, no device or FIFO opened) whose
 * own path the kernel reports, so a link swapped in between resolving and looking is caught.
 */
import { constants } from "node:fs";
import { open, readlink, realpath, symlink } from "node:fs/promises";
import { checkLocalInput, localSourcePath } from "@ce/model";
import { TransferError } from "../http.js";
import type { SessionDest } from "../http.js";

/** Linux's O_PATH (not in Node's fs.constants): a descriptor that names an object without opening it for I/O. */
const O_PATH = 0o10000000; // libuv adds O_CLOEXEC itself

export async function linkLocalInput(source: string, dest: SessionDest, prefixes: readonly string[]): Promise<number> {
  const path = localSourcePath(source) ?? "";
  const r = checkLocalInput(path, prefixes);
  if ("reason" in r) throw new TransferError(`local input ${path || source} ${r.reason}`, false);
  const fail = (why: string) => new TransferError(`local input ${r.path}: ${why}`, false);
  const areas = await resolvedAreas(prefixes);
  // A missing file fails now, not in the batch job. One answer for "missing" and "outside": root
  // resolves the links, so telling them apart would say whether a root-only path exists.
  const absent = fail(`no such file in the software areas (${prefixes.join(", ")}), or a symbolic link leads outside them`);
  const real = await realpath(r.path).catch(() => undefined);
  if (real === undefined || !inside(real, areas)) throw absent;
  const fh = await open(real, O_PATH | constants.O_NOFOLLOW).catch(() => {
    throw absent;
  });
  let size: number;
  try {
    // What the descriptor holds, by the kernel's account: the resolved path unless it changed since.
    const held = await readlink(`/proc/self/fd/${fh.fd}`);
    if (held !== real || !inside(held, areas)) throw absent;
    const st = await fh.stat();
    if (!st.isFile()) throw fail("not a regular file");
    size = st.size;
  } finally {
    await fh.close();
  }
  // The link names the checked path: what the job opens on the node is what was checked here.
  await symlink(real, dest.dir.at(dest.name)).catch((e: NodeJS.ErrnoException) => {
    throw new TransferError(`linking ${r.path} into the session as ${dest.at}: ${e.code ?? e.message}`, false);
  });
  return size;
}

/** The listed areas as they are on disk (a prefix may itself be a link, `/sw -> /nfs/sw`); missing ones dropped. */
async function resolvedAreas(prefixes: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of prefixes) {
    const clean = p.replace(/\/+$/, "");
    if (!clean.startsWith("/")) continue;
    const rp = await realpath(clean).catch(() => undefined);
    if (rp !== undefined && rp !== "/") out.push(rp);
  }
  return out;
}

/** Strictly below one of `areas` (`/cvmfs/a` is not under `/cvmfs/ab`, nor is an area its own input). */
const inside = (path: string, areas: readonly string[]) => areas.some((a) => path.startsWith(`${a}/`));
