import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { removePath, walkFiles } from "@ce/sessionfs";
import { spyOnClose } from "@ce/sessionfs/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileQueue } from "@ce/controldir";

/**
 * The threads of one process share one descriptor table: a descriptor closed twice on one
 * thread closes what another thread opened meanwhile (issue 29: the JEM's file thread aborted in
 * readFileSync). This runs the JEM's file work at once on several threads: session removals and
 * walks on the main thread (every close watched: EBADF fails), the JEM's file thread (FileQueue)
 * writing and reading control-like files, and plain file threads that check each descriptor is
 * still theirs before closing it.
 */
const MS = 3_000;
const THREADS = 3;
let base: string;

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "jem-fd-threads-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

interface Load {
  ops: number;
  ebadf: number;
  wrongFile: number;
  wrongBytes: number;
  errors: string[];
}

function plainThread(dir: string): Promise<Load> {
  mkdirSync(dir);
  const w = new Worker(new URL("./support/fd-load-worker.mjs", import.meta.url), { workerData: { dir, ms: MS } });
  return new Promise((resolve, reject) => {
    w.once("message", resolve);
    w.once("error", reject);
    w.once("exit", (code) => reject(new Error(`load thread exited (${code}) before reporting`)));
  });
}

async function fsqLoad(q: FileQueue, dir: string, end: number): Promise<Load> {
  mkdirSync(dir);
  const out: Load = { ops: 0, ebadf: 0, wrongFile: 0, wrongBytes: 0, errors: [] };
  for (let i = 0; Date.now() < end; i++) {
    const path = join(dir, `c${i % 8}`);
    const body = `${path}:${i}`;
    try {
      const [, whole, small, empty] = await q.run([
        ["write", path, body, 0o600],
        ["read", path],
        ["readSmall", path, 4096, false],
        ["isEmptyDir", dir],
      ]);
      if (whole !== body || small !== body || empty !== false) out.wrongBytes++;
      out.ops++;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EBADF") out.ebadf++;
      else if (out.errors.length < 5) out.errors.push(String(e));
    }
  }
  return out;
}

/** A small session tree: files and nested directories, as a job leaves them. */
function sessionTree(root: string): void {
  for (const d of ["", "/a", "/a/b", "/c"]) {
    mkdirSync(root + d, { recursive: true });
    for (let i = 0; i < 3; i++) writeFileSync(`${root}${d}/f${i}`, "x");
  }
}

async function sessionLoad(dir: string, end: number): Promise<number> {
  mkdirSync(dir);
  let n = 0;
  for (; Date.now() < end; n++) {
    const s = join(dir, `s${n}`);
    sessionTree(s);
    const walked = await walkFiles(s, ["a"]);
    expect(walked.files).toHaveLength(6);
    await removePath(s, ["a", "b"]); // a subdirectory: its top is closed, removed, never closed again
    await removePath(s, ["c"]);
    await removePath(s, []); // the whole session directory
  }
  return n;
}

describe("the JEM's file work on several threads at once", () => {
  it("no close ever reports EBADF and no thread's descriptor is closed under it", async () => {
    const spy = spyOnClose({ bystanders: false });
    const q = new FileQueue();
    try {
      const end = Date.now() + MS;
      const [removals, viaQueue, ...plain] = await Promise.all([
        sessionLoad(join(base, "sessions"), end),
        fsqLoad(q, join(base, "control"), end),
        ...Array.from({ length: THREADS }, (_, i) => plainThread(join(base, `t${i}`))),
      ]);
      const loads = [viaQueue, ...plain];
      expect({ mainThreadEbadf: spy.ebadf.length }).toEqual({ mainThreadEbadf: 0 });
      expect(loads.map((l) => ({ ebadf: l.ebadf, wrongFile: l.wrongFile, wrongBytes: l.wrongBytes, errors: l.errors }))).toEqual(
        loads.map(() => ({ ebadf: 0, wrongFile: 0, wrongBytes: 0, errors: [] })),
      );
      expect(removals).toBeGreaterThan(20);
      for (const l of loads) expect(l.ops).toBeGreaterThan(20);
    } finally {
      spy.restore();
      await q.close();
    }
  });
});
