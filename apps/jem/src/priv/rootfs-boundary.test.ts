import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The JEM runs as root. Its file operations that write, delete, create, link or change owners and
 * modes belong to priv/rootfs.ts (trees of a job) and @ce/controldir's ops.ts (the file thread's
 * single files), where each is descriptor-relative and follows no link (SECURITY.md "The JEM's root file
 * operations"). This scan keeps it so: a JEM source file elsewhere that imports such a function
 * from node:fs (or the module whole) fails here. The few other uses are listed with the names they
 * may use and why they are safe; a new name there fails too.
 */

const SRC = join(import.meta.dirname, "..");

/** Everything in node:fs and node:fs/promises that changes the file system or opens for writing. */
const CHANGES = new Set(
  [
    "writeFile",
    "appendFile",
    "rm",
    "rmdir",
    "unlink",
    "rename",
    "mkdir",
    "mkdtemp",
    "chmod",
    "lchmod",
    "fchmod",
    "chown",
    "lchown",
    "fchown",
    "symlink",
    "link",
    "copyFile",
    "cp",
    "truncate",
    "ftruncate",
    "utimes",
    "lutimes",
    "futimes",
    "open",
    "write",
    "writev",
    "createWriteStream",
  ].flatMap((n) => [n, `${n}Sync`]),
);

/** The module: may use all of node:fs. */
const OWNERS = new Set(["priv/rootfs.ts", "priv/rootfs-cache.ts"]);

/** Other files, the changing names each may use, and why that is safe as root. */
const EXCEPTIONS: Record<string, { names: string[]; why: string }> = {
  "lrms/scripts-copy.ts": {
    names: ["mkdtempSync", "cpSync", "chmodSync", "rmSync"],
    why: "the back-end scripts' private copy: a fresh mkdtemp dir (root's, nothing group/other-writable) that only root writes; stale copies are removed only when lstat shows a real directory owned by the JEM's uid, and in the sticky temp dir no other user can rename or replace a root-owned entry",
  },
  "contain/cgroup.ts": {
    names: ["mkdir", "rmdir", "writeFile"],
    why: "the per-job cgroups under the cgroup file system: directories and control files only root can create or write (a job's processes cannot add entries or move themselves out)",
  },
  "lrms/script-backend.ts": {
    names: ["writeFile", "chmod", "rename"],
    why: "writeAtomic serves mapping off only (no accounts, no root boundary); with mapping on batch files go through RunAsJob.writeFile (@ce/controldir ops.ts writeOwned)",
  },
  "staging/protocols/local.ts": {
    names: ["symlink", "open"],
    why: "links a software-area input into the session: created relative to the session directory descriptor (@ce/sessionfs Dir.at), never by path; the link is the job's to read with its own rights. `open` is O_PATH|O_NOFOLLOW on the resolved input: a descriptor that pins the file for fstat and opens nothing for reading or writing",
  },
  "staging/protocols/xrootd.ts": {
    names: ["rename", "unlink"],
    why: "a download's part file named relative to the session directory descriptor (Dir.at), never by path",
  },
  "staging/protocols/xrootd-auth.ts": {
    names: ["mkdtemp", "writeFile", "rm", "rmSync", "symlink", "chmod"],
    why: "the combined CA directory the tools verify servers with: a fresh mkdtemp dir (root's; made 0755 so the jobs' accounts running the tools can read the public certificates in it, nothing else), written only by root, removed at exit",
  },
  "staging/tools.ts": {
    names: ["mkdtemp", "chmod", "mkdir", "writeFile", "chown"],
    why: "a tool run's private credential directory: a fresh mkdtemp dir (root's, 0711) holding one 0700 dir that stays root's while root writes the job's own credential into it (O_EXCL); only then are its files and the dir chowned to the account, so nothing the account could swap in is ever followed; removed with the descriptor-relative removeTree",
  },
  "states/submit.ts": {
    names: ["mkdir"],
    why: "mapping off only (no accounts, no root boundary): the CE's own batch dir for the job",
  },
  "staging/http.ts": {
    names: ["rename", "unlink"],
    why: "a download's part file, named relative to a session directory descriptor (@ce/sessionfs Dir.at), never by path",
  },
};

/** The changing node:fs names a source uses, "*" for the module whole (default, namespace, require, import()). */
export function fsChanges(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/import\s+(type\s+)?([^;]*?)\s+from\s+["'](?:node:)?fs(?:\/promises)?["']/g)) {
    if (m[1]) continue;
    const clause = m[2]!.trim();
    const braces = /\{([^}]*)\}/.exec(clause);
    if (clause.replace(/\{[^}]*\}/, "").replace(/[\s,]/g, "") !== "") out.push("*");
    for (const part of braces?.[1]?.split(",") ?? []) {
      const name = part
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)[0]!
        .trim();
      if (!part.trim().startsWith("type ") && CHANGES.has(name)) out.push(name);
    }
  }
  if (/(?:require|import)\s*\(\s*["'](?:node:)?fs(?:\/promises)?["']/.test(source)) out.push("*");
  return out;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "testdata" ? [] : sources(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

describe("the JEM's root file operations stay in priv/rootfs", () => {
  it("no JEM source outside the module changes the file system through node:fs (listed exceptions aside)", () => {
    const offences: string[] = [];
    for (const file of sources(SRC)) {
      const rel = relative(SRC, file);
      if (OWNERS.has(rel)) continue;
      const allowed = new Set(EXCEPTIONS[rel]?.names ?? []);
      for (const name of fsChanges(readFileSync(file, "utf8"))) if (!allowed.has(name)) offences.push(`${rel}: ${name}`);
    }
    expect(offences).toEqual([]);
  });

  it("every listed exception still exists and still needs its names (the list does not rot)", () => {
    for (const [rel, { names }] of Object.entries(EXCEPTIONS)) {
      const used = new Set(fsChanges(readFileSync(join(SRC, rel), "utf8")));
      expect(
        names.filter((n) => !used.has(n)),
        rel,
      ).toEqual([]);
    }
  });

  it("the scan sees every way in", () => {
    expect(fsChanges('import { readFile, rm } from "node:fs/promises";')).toEqual(["rm"]);
    expect(fsChanges('import { unlinkSync as u, type Stats } from "fs";')).toEqual(["unlinkSync"]);
    expect(fsChanges('import fs from "node:fs";')).toEqual(["*"]);
    expect(fsChanges('import * as fs from "node:fs/promises";')).toEqual(["*"]);
    expect(fsChanges('import fs, { rename } from "node:fs";')).toEqual(["*", "rename"]);
    expect(fsChanges('const { rm } = await import("node:fs/promises");')).toEqual(["*"]);
    expect(fsChanges('const fs = require("fs");')).toEqual(["*"]);
    expect(fsChanges('import type { Stats } from "node:fs";\nimport { readdir, lstat } from "node:fs/promises";')).toEqual([]);
  });
});
