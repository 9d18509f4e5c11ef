import { bytesInWords } from "@ce/model";
import { closeHandle, walkFiles } from "@ce/sessionfs";
import { SESSION_TOKEN_FILE } from "@ce/store";
import type { FileHandle } from "node:fs/promises";
import type { Logger } from "pino";
import { BadRequest, CeError } from "../../errors.js";
import { fsError } from "./errors.js";
import { openTarget, SessionFsError } from "./fs.js";
import { fileHeader, padding, trailer, type TarEntry } from "./tar.js";

/**
 * "Download all": a directory of a job's session (after FINISHING, its outputs) as one tar
 * stream, for the pages (`…/session/[dir/]?download=tar`). Everything in the directory is the
 * job's and hostile: the tree is walked without following links (`walkFiles`), each file opened
 * again through the no-follow, regular-file, single-link open, and only regular files go in —
 * symlinks, special files and hard links are left out, as in listings. Names are the walk's,
 * under one top directory, checked to extract inside it. The size is bounded before a byte is
 * sent (`gateway.limits.archiveBytes`), and each file is sent as it was when measured.
 */

const CHUNK = 256 * 1024;

export class ArchiveTooLarge extends CeError {
  constructor(what: string) {
    super(507, "ARCHIVE_TOO_LARGE", what);
  }
}

export interface ArchiveRequest {
  root: string;
  /** The directory to archive, as session path segments ([] = the whole session). */
  segments: readonly string[];
  /** The archive's top directory (the job id), also its file name. */
  top: string;
  maxBytes: number;
  maxEntries: number;
  head: boolean;
  log?: Logger | undefined;
}

interface Planned extends TarEntry {
  /** Segments under the session root, to open again. */
  at: string[];
}

export async function archiveResponse(req: ArchiveRequest): Promise<Response> {
  const plan = await planArchive(req);
  const length = plan.reduce((n, e) => n + fileHeader(e).length + e.size + padding(e.size), 0) + trailer().length;
  const name = [req.top, ...req.segments].join("-").replace(/[^A-Za-z0-9._-]/g, "_");
  const headers = {
    "Content-Type": "application/x-tar",
    "Content-Length": String(length),
    "Content-Disposition": `attachment; filename="${name}.tar"`,
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
  };
  req.log?.info({ files: plan.length, bytes: length, dir: `/${req.segments.join("/")}` }, "session archive");
  if (req.head) return new Response(null, { status: 200, headers });
  return new Response(tarStream(req.root, plan, req.log), { status: 200, headers });
}

/** The files to send with their sizes now; refuses a directory over the bounds before anything is sent. */
async function planArchive(req: ArchiveRequest): Promise<Planned[]> {
  let walk;
  try {
    walk = await walkFiles(req.root, req.segments, req.maxEntries);
  } catch (e) {
    if (e instanceof SessionFsError && e.kind === "too-large")
      throw new ArchiveTooLarge(
        `${e.at} has more than ${req.maxEntries} entries, more than one archive may hold (gateway.limits.listingEntries); download its subdirectories or files one by one`,
      );
    if (e instanceof SessionFsError && e.kind === "not-dir")
      throw new BadRequest(`${e.at} is a file: download=tar archives a directory; download the file itself`, "BAD_ARCHIVE");
    return fsError(e, "read");
  }
  if (walk.refused.length > 0)
    req.log?.info(
      { refused: walk.refused.slice(0, 20).map((r) => `${r.kind} ${r.at}`), count: walk.refused.length },
      "session archive: entries left out",
    );
  const base = req.segments.length;
  const out: Planned[] = [];
  let total = 0;
  for (const rel of walk.files) {
    // The walk's paths start at the session root; the archive's at the directory asked for.
    const at = rel.split("/").filter((p) => p !== "");
    // The job's bearer token (ENV/TOKEN) is never served from the session (operations.ts), so
    // not in its archive either: a compute.read caller must not obtain it this way.
    if (at.length === 1 && at[0] === SESSION_TOKEN_FILE) continue;
    const inside = at.slice(base);
    const name = [req.top, ...inside].join("/");
    let stat;
    try {
      const t = await openTarget(req.root, at);
      if (t.kind !== "file") {
        await t.dir.close();
        continue;
      }
      stat = t.stat;
      await closeHandle(t.handle, rel);
    } catch (e) {
      if (e instanceof SessionFsError) continue; // gone or swapped since the walk: left out, as the walk leaves links out
      throw e;
    }
    total += stat.size;
    if (total > req.maxBytes)
      throw new ArchiveTooLarge(
        `The files of /${req.segments.join("/")} add up to more than ${bytesInWords(req.maxBytes)}, the most one archive may hold (gateway.limits.archiveBytes); download them one by one or with arcget`,
      );
    out.push({ name, at, size: stat.size, mtimeMs: stat.mtimeMs });
  }
  return out;
}

/**
 * The archive as a web stream, pulled by the response: one file open at a time, CHUNK bytes a
 * pull. A file gone or shorter than measured ends the stream with an error (the client sees a
 * short download, never an archive whose lengths lie); a file that grew is sent as measured.
 */
function tarStream(root: string, plan: readonly Planned[], log: Logger | undefined): ReadableStream<Uint8Array> {
  let next = 0;
  let cur: { handle: FileHandle; entry: Planned; sent: number } | undefined;
  const release = async () => {
    const c = cur;
    cur = undefined;
    if (c) await closeHandle(c.handle, c.entry.name).catch(() => undefined);
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      try {
        if (!cur) {
          const entry = plan[next++];
          if (!entry) {
            ctl.enqueue(trailer());
            ctl.close();
            return;
          }
          const t = await openTarget(root, entry.at);
          if (t.kind !== "file") {
            await t.dir.close();
            throw new Error(`${entry.name} is no longer a file`);
          }
          cur = { handle: t.handle, entry, sent: 0 };
          ctl.enqueue(fileHeader(entry));
        }
        const { handle, entry } = cur;
        const want = Math.min(CHUNK, entry.size - cur.sent);
        if (want > 0) {
          const buf = Buffer.alloc(want);
          const { bytesRead } = await handle.read(buf, 0, want, cur.sent);
          if (bytesRead === 0) throw new Error(`${entry.name} shrank while being archived`);
          cur.sent += bytesRead;
          ctl.enqueue(bytesRead === want ? buf : buf.subarray(0, bytesRead));
        }
        if (cur.sent >= entry.size) {
          const pad = padding(entry.size);
          if (pad > 0) ctl.enqueue(Buffer.alloc(pad));
          await release();
        }
      } catch (e) {
        await release();
        log?.warn({ err: e }, "session archive cut short");
        ctl.error(e);
      }
    },
    async cancel() {
      await release();
    },
  });
}
