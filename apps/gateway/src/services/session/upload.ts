import { fstatSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { closeHandle, numOf, type OwnedFd } from "@ce/sessionfs";
import type { Logger } from "pino";
import { BadRequest, CeError, PayloadTooLarge } from "../../errors.js";
import { type ContentRange, parseContentRange, type SessionAccounts, SessionQuotaExceeded, type UploadQuota } from "./accounting.js";
import { DIRECT_MIN, reopenDirect } from "./direct.js";
import { Conflict, fsError } from "./errors.js";
import { openForWrite, openTarget, removePath } from "./fs.js";
import { checkDeclaredLength, nodeStreamOf } from "./intake.js";
import type { SessionPath } from "./path.js";
import { BodyAborted, receiveBody } from "./receive.js";

/** What the route parsed out of a PUT. */
export interface PutRequest {
  /** The job's session directory. */
  root: string;
  path: SessionPath;
  contentLength: string | undefined;
  contentRange: string | undefined;
  /** The Node request when there is one (the deployed server): its body is read from it directly. */
  incoming: IncomingMessage | undefined;
  /**
   * The body as a web stream, asked for only when there is no Node request (on the Node server,
   * making the web stream starts consuming the Node request).
   */
  body: () => ReadableStream<Uint8Array> | null;
  /** `gateway.limits.uploadBytes` */
  limit: number;
}

/**
 * The states of one upload, in order: `opening` (limits and quota checked, file opened, its old
 * content truncated unless a range is written), `receiving` (receive.ts moves the body into the
 * file), `flushing` (descriptors closed, the quota charged the file's real change in size, a
 * refused whole-file upload removed), then `committed` (completion recorded: accounting.ts) or
 * `aborted` (the error reaches the client; nothing is reported complete).
 */
export type UploadState = "opening" | "receiving" | "flushing" | "committed" | "aborted";

const NEXT: Record<UploadState, readonly UploadState[]> = {
  opening: ["receiving", "aborted"],
  receiving: ["flushing"],
  flushing: ["committed", "aborted"],
  committed: [],
  aborted: [],
};

/**
 * PUT of one session file (docs/interface.md E6, decisions #14): the one upload writer. Truncates
 * unless a `Content-Range` gives the offset. The session-bytes quota is checked before anything is
 * written or truncated when the length is declared (the old content stays on refusal); a chunked
 * whole-file upload refused midway is removed again.
 */
export class UploadWriter {
  private current: UploadState = "opening";
  private readonly range: ContentRange | undefined;
  private readonly declared: number | undefined;
  private readonly quota: UploadQuota;
  private handle: FileHandle | undefined;
  private directFd: OwnedFd | undefined;
  private sizeBefore = 0;
  /** Body bytes received (and written). */
  received = 0;

  constructor(
    private readonly req: PutRequest,
    private readonly accounts: SessionAccounts,
    private readonly log?: Logger,
  ) {
    if (req.path.segments.length === 0) throw new Conflict("Cannot write the session directory itself: PUT stores files only");
    checkDeclaredLength(req.contentLength, req.limit, "Upload");
    this.range = parseContentRange(req.contentRange);
    if (this.offset >= req.limit) throw new PayloadTooLarge("Upload", req.limit);
    if (this.range?.total !== undefined && this.range.total > req.limit)
      throw new PayloadTooLarge("Upload (Content-Range total)", req.limit);
    this.declared = declaredLength(req.contentLength);
    this.quota = accounts.uploadQuota();
  }

  get state(): UploadState {
    return this.current;
  }

  private get offset(): number {
    return this.range?.start ?? 0;
  }

  private to(next: UploadState): void {
    if (!NEXT[this.current].includes(next)) throw new Error(`upload writer: ${this.current} → ${next}`);
    this.current = next;
  }

  /** Runs the upload through its states; resolves once committed (true: the file is now complete). */
  async run(): Promise<boolean> {
    try {
      await this.open();
    } catch (e) {
      this.to("aborted");
      throw e;
    }
    this.to("receiving");
    let failure: unknown;
    try {
      await this.receive();
    } catch (e) {
      failure = e ?? new Error("upload failed");
    }
    this.to("flushing");
    await this.flush(failure);
    if (failure !== undefined) {
      this.to("aborted");
      // A client that went away mid-body is not a server error; nothing is reported as complete.
      if (failure instanceof BodyAborted || (!(failure instanceof CeError) && this.req.incoming?.errored)) {
        throw new BadRequest("Upload aborted by the client", "UPLOAD_ABORTED");
      }
      throw failure;
    }
    const complete = await this.accounts.uploaded(this.req.path.normalized, this.range, this.received);
    this.to("committed");
    return complete;
  }

  /** opening: quota for a declared length, the file opened, its baseline taken, truncated for a whole-file PUT. */
  private async open(): Promise<void> {
    const { root, path } = this.req;
    if (this.declared !== undefined) {
      const before = await currentSize(root, path.segments);
      await this.quota.ensure((this.range ? Math.max(before, this.offset + this.declared) : this.declared) - before);
    }
    this.handle = await openForWrite(root, path.segments).catch((e: unknown) => fsError(e, "write"));
  }

  /** receiving: the body into the file, through the direct path when large (or unannounced) and there is a Node request. */
  private async receive(): Promise<void> {
    const handle = this.handle!;
    const { path, incoming, limit } = this.req;
    // Synchronous stat + begin: no other PUT of this file settles in between (see UploadQuota).
    this.sizeBefore = fstatSync(numOf(handle, path.normalized)).size;
    this.quota.begin(path.normalized, this.sizeBefore);
    const base = this.range ? this.sizeBefore : 0;
    // Only a file with content is truncated: ext4 flushes a file truncated to 0 when it is closed
    // (its replace-by-truncate heuristic), which held the reply to a new large upload.
    if (!this.range && this.sizeBefore > 0) await handle.truncate(0);
    const grow = (n: number) => this.quota.need(Math.max(base, this.offset + n) - this.sizeBefore);
    if (incoming && (this.declared === undefined || this.declared >= DIRECT_MIN)) this.directFd = await reopenDirect(handle, "w");
    const src = incoming ?? nodeStreamOf(this.req.body());
    try {
      this.received = await receiveBody(src, handle, this.offset, limit - this.offset, "Upload", grow, this.directFd);
    } finally {
      if (!incoming) src.destroy();
    }
  }

  /** flushing: a refused whole-file upload emptied, descriptors closed, the quota settled, the refused file removed. */
  private async flush(failure: unknown): Promise<void> {
    const handle = this.handle!;
    const { root, path } = this.req;
    const discard = failure instanceof SessionQuotaExceeded && !this.range;
    if (discard) await handle.truncate(0).catch(() => undefined);
    // receiveBody settled only with no write in flight: both descriptors are ours alone now.
    await this.directFd?.close();
    const settled = this.quota.settle(this.sizeBefore, sizeOf(handle, this.sizeBefore));
    await closeHandle(handle, path.normalized);
    await settled.catch((err: unknown) => this.log?.warn({ err, path: path.normalized }, "session quota not settled"));
    if (discard) await removePath(root, path.segments).catch(() => undefined);
  }
}

function declaredLength(header: string | undefined): number | undefined {
  const n = header === undefined ? NaN : Number(header);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Size of an open file now (`fallback` if it cannot be read). */
function sizeOf(handle: FileHandle, fallback: number): number {
  try {
    return fstatSync(numOf(handle, "session file")).size;
  } catch {
    return fallback;
  }
}

/** Size of the regular file the path names now (0 when missing or not a file): the quota baseline. */
async function currentSize(root: string, segments: readonly string[]): Promise<number> {
  const t = await openTarget(root, segments).catch(() => undefined);
  if (!t) return 0;
  if (t.kind === "file") await closeHandle(t.handle, "session file");
  else await t.dir.close();
  return t.kind === "file" ? t.stat.size : 0;
}
