import type { FileHandle } from "node:fs/promises";
import { closeHandle, Dir, openFileIn, SessionFsError } from "@ce/sessionfs";
import { fileq, type ControlDir, type FsOp } from "@ce/controldir";

/**
 * What the batch job leaves for the CE, read from its batch dir `<session>.lrms` (ControlDir.batchDir).
 * The job's account owns that directory and everything in it, so every name there is hostile:
 * it is read as root only through @ce/sessionfs, by descriptor: the batch dir opened
 * O_DIRECTORY|O_NOFOLLOW (its parent, the session root, is the CE's), each file
 * opened O_NOFOLLOW|O_NONBLOCK relative to it and kept only when the descriptor is a regular file
 * with one link (no link to a CE secret, no FIFO that blocks, no hard link to another job's
 * file), and at most its cap read. A job can thus say anything about itself (its exit code, its
 * usage figures: a batch system's own `usage` wins for those) and nothing about another job, and
 * it cannot make the JEM read elsewhere or hold a large file.
 */

/** The batch files copied into the job dir, with what is read of each: the head or the tail, at most `max` bytes. */
export const BATCH_FILES = {
  lrms_done: { max: 64 * 1024, tail: false },
  diag: { max: 64 * 1024, tail: true },
  comment: { max: 1024 * 1024, tail: true },
} as const;
export type BatchFileName = keyof typeof BATCH_FILES;

/** Why a batch file was not read (a refused entry is reported, never followed). */
export interface BatchRefusal {
  file: BatchFileName;
  reason: string;
}

/** `file` as the job left it, undefined when absent or refused (refusals listed). */
export async function readBatchFiles(
  control: ControlDir,
  jobId: string,
  files: readonly BatchFileName[],
): Promise<{ text: Partial<Record<BatchFileName, string>>; refused: BatchRefusal[] }> {
  const text: Partial<Record<BatchFileName, string>> = {};
  const refused: BatchRefusal[] = [];
  const dir = await openBatchDir(control, jobId, refused, files);
  if (!dir) return { text, refused };
  try {
    for (const file of files) {
      let opened: { handle: FileHandle; stat: { size: number } } | undefined;
      try {
        opened = await openFileIn(dir, file, `/${file}`, { refuseHardLinks: true });
      } catch (e) {
        if (e instanceof SessionFsError && e.kind === "missing") continue;
        if (!(e instanceof SessionFsError)) throw e;
        refused.push({ file, reason: e.reason });
        continue;
      }
      try {
        text[file] = await readCapped(opened.handle, opened.stat.size, BATCH_FILES[file]);
      } finally {
        await closeHandle(opened.handle, `/${file}`);
      }
    }
  } finally {
    await dir.close();
  }
  return { text, refused };
}

/**
 * The batch dir held open: its last name not followed (O_NOFOLLOW|O_DIRECTORY), its ancestors the
 * CE's (the session root and above, which the account cannot change: the same start as every
 * session operation's).
 */
async function openBatchDir(
  control: ControlDir,
  jobId: string,
  refused: BatchRefusal[],
  files: readonly BatchFileName[],
): Promise<Dir | undefined> {
  try {
    return await Dir.open(control.batchDir(jobId));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    // ELOOP/ENOTDIR: not a directory of its own (the account cannot make it one: the session root is the CE's).
    if (code === "ELOOP" || code === "ENOTDIR") {
      for (const file of files) refused.push({ file, reason: `the batch directory is not a directory (${code})` });
      return undefined;
    }
    throw e;
  }
}

/** At most `max` bytes of an open regular file of `size` bytes: its head, or its tail. */
async function readCapped(handle: FileHandle, size: number, o: { max: number; tail: boolean }): Promise<string> {
  const len = Math.min(size, o.max);
  const buf = Buffer.alloc(len);
  let off = 0;
  const start = o.tail ? size - len : 0;
  while (off < len) {
    const { bytesRead } = await handle.read(buf, off, len - off, start + off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return buf.toString("utf8", 0, off);
}

/**
 * Copies what the batch job wrote (lrms_done, diag, comment) from its batch dir into the CE's job
 * dir, where diagnose and the state handlers read them; lrms_done last, so a reader that finds it
 * finds diag and comment copied. `ended` false while the batch job runs (then `done` is the job
 * dir's own marker, if the poller wrote one from the batch system's answer).
 */
export async function collectBatchFiles(
  control: ControlDir,
  jobId: string,
): Promise<{ ended: boolean; done: string | undefined; diag: string | undefined; refused: BatchRefusal[] }> {
  // lrms_done first: the wrapper writes diag before it, so diag is complete once it is there.
  const first = await readBatchFiles(control, jobId, ["lrms_done"]);
  const [have, haveDiag] = (await fileq.run([
    ["read", control.file(jobId, "lrms_done")],
    ["read", control.file(jobId, "diag")],
  ])) as Array<string | null>;
  const done = first.text.lrms_done;
  if (done === undefined) return { ended: false, done: have ?? undefined, diag: haveDiag ?? undefined, refused: first.refused };
  const rest = await readBatchFiles(control, jobId, ["diag", "comment"]);
  const { diag, comment } = rest.text;
  const writes: FsOp[] = [];
  if (diag !== undefined) writes.push(control.writeOp(jobId, "diag", diag));
  if (comment !== undefined) writes.push(control.writeOp(jobId, "comment", comment));
  if (have === null) writes.push(control.writeOp(jobId, "lrms_done", done));
  if (writes.length > 0) await fileq.run(writes);
  return { ended: true, done: have ?? done, diag: diag ?? haveDiag ?? undefined, refused: [...first.refused, ...rest.refused] };
}

/** Whether the batch job left its end marker (a regular file, not followed): the watcher's scan. */
export async function batchEnded(control: ControlDir, jobId: string): Promise<boolean> {
  return (await fileq.one(["lexists", `${control.batchDir(jobId)}/lrms_done`])) === true;
}
