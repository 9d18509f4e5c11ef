import type { Redis } from "ioredis";
import { type JobRecord, type QuotaRefusal, SessionBytes, UploadRanges } from "@ce/store";
import { completeUpload } from "@ce/controldir";
import type { Services } from "../../context.js";
import { BadRequest, CeError } from "../../errors.js";

/**
 * Quota and completion of session uploads, one service (`SessionAccounts`, at the end): what a
 * PUT may add (session-bytes quota, `UploadQuota`), what it did add once settled, when a file
 * counts as uploaded (`UploadTracker`) and what then happens (input_status, the JEM's doorbell),
 * and what a DELETE gives back.
 *
 * Upload-completion bookkeeping (docs/interface.md E6; docs/architecture.md "Job flow"). A file counts as
 * uploaded when one PUT carried it whole, or when the byte ranges of partial PUTs
 * (`Content-Range: bytes a-b/total`) together cover [0,total). The ranges live in Redis
 * (packages/store UploadRanges, one hash per job), so partial PUTs may land on any gateway. The
 * list is capped per file and per job: a client scattering one-byte ranges gets a 409 naming the
 * cap instead of a Redis script that grows with every PUT.
 */

/** A request `Content-Range: bytes a-b/total` (`total` may be `*` = unknown). */
export interface ContentRange {
  start: number;
  end: number;
  total: number | undefined;
}

/** Longest header value looked at: a valid one is < 60 characters. */
const MAX_HEADER = 200;

export function parseContentRange(header: string | undefined): ContentRange | undefined {
  if (header === undefined) return undefined;
  const m = header.length <= MAX_HEADER ? /^\s*bytes\s+(\d{1,16})-(\d{1,16})\/(\d{1,16}|\*)\s*$/i.exec(header) : null;
  if (!m) throw new BadRequest("Invalid Content-Range: expected 'bytes <first>-<last>/<total>'", "BAD_CONTENT_RANGE");
  const start = Number(m[1]);
  const end = Number(m[2]);
  const total = m[3] === "*" ? undefined : Number(m[3]);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end < start) {
    throw new BadRequest("Invalid Content-Range: last byte before first byte", "BAD_CONTENT_RANGE");
  }
  if (total !== undefined && (!Number.isSafeInteger(total) || end >= total)) {
    throw new BadRequest("Invalid Content-Range: range extends beyond the total length", "BAD_CONTENT_RANGE");
  }
  return { start, end, total };
}

/** The upload is split into more pieces than the bookkeeping keeps. */
export class UploadFragmented extends CeError {
  constructor(message: string) {
    super(409, "UPLOAD_FRAGMENTED", message);
  }
}

export interface UploadLimits {
  /** `gateway.limits.uploadRanges` */
  maxRanges: number;
  /** `gateway.limits.partialUploadsPerJob` */
  maxFiles: number;
}

/** How long partial-upload bookkeeping survives without activity. */
const TTL_MS = 7 * 24 * 3600 * 1000;

export class UploadTracker {
  private readonly ranges: UploadRanges;

  constructor(
    redis: Redis,
    prefix: string,
    private readonly limits: UploadLimits,
  ) {
    this.ranges = new UploadRanges(redis, prefix, { ...limits, ttlMs: TTL_MS });
  }

  /**
   * Records that bytes [start, start+received) of `path` arrived. Returns true when the file is
   * now complete. Without a Content-Range the PUT carried the whole file.
   */
  async record(jobId: string, path: string, range: ContentRange | undefined, received: number): Promise<boolean> {
    if (!range) {
      await this.ranges.clear(jobId, path);
      return true;
    }
    if (range.total === undefined) return false; // total unknown: cannot tell
    if (received === 0) return false;
    const end = Math.min(range.start + received, range.total);
    const res = await this.ranges.add(jobId, path, range.start, end, range.total);
    if (res === "too-many-ranges") {
      throw new UploadFragmented(
        `Upload of ${path} is split into more than ${this.limits.maxRanges} disjoint byte ranges (gateway.limits.uploadRanges); ` +
          "the bytes were written but are not tracked: send adjacent ranges or the whole file",
      );
    }
    if (res === "too-many-files") {
      throw new UploadFragmented(
        `More than ${this.limits.maxFiles} files of this job are partially uploaded (gateway.limits.partialUploadsPerJob); complete or delete some first`,
      );
    }
    return res === "complete";
  }

  /** Forgets bookkeeping below a deleted path (the whole job for "/"). */
  forget(jobId: string, path: string): Promise<void> {
    return this.ranges.forget(jobId, path);
  }
}

/** An upload would take a job or an owner over its session-bytes quota. */
export class SessionQuotaExceeded extends CeError {
  constructor(r: QuotaRefusal) {
    const whose = r.quota === "sessionBytesPerJob" ? "this job" : "all jobs of this owner";
    super(
      507,
      "SESSION_QUOTA",
      `Upload refused: session quota quotas.${r.quota} (${r.limit} bytes) would be exceeded; ${r.used} bytes are already uploaded for ${whose}`,
    );
  }
}

/** Reserves quota in steps while a body of unknown length streams in (fewer Redis calls). */
const STEP = 8 * 1024 * 1024;

/** PUTs writing one file at the same time on this gateway: its size when last settled, their pooled reservations. */
interface FileAccount {
  charged: number;
  pooled: number;
  users: number;
}
const accounts = new Map<string, FileAccount>();

/**
 * The session-bytes quota of one PUT. Bytes are reserved before they are written (up front when
 * the length is declared, in steps while streaming otherwise), so a refusal never leaves more on
 * disk than was counted; `settle` then charges exactly the change in the file's size. PUTs of the
 * same file at once (parallel Content-Range parts) share one account (`begin`): each would
 * otherwise charge the growth the others caused too.
 */
export class UploadQuota {
  private reserved = 0;
  private account?: { key: string; a: FileAccount };

  constructor(
    private readonly bytes: SessionBytes,
    private readonly owner: string,
    private readonly jobId: string,
  ) {}

  /** As `ensure`, but undefined (no promise, no microtask) when `growth` is already reserved. */
  need(growth: number): Promise<void> | undefined {
    return growth <= this.reserved ? undefined : this.ensure(growth);
  }

  /** Makes sure `growth` bytes (over the size before the PUT) are reserved, or throws 507. */
  async ensure(growth: number): Promise<void> {
    if (growth <= this.reserved) return;
    const need = growth - this.reserved;
    const ask = Math.max(need, STEP);
    if (ask > need && !(await this.bytes.reserve(this.owner, this.jobId, ask))) {
      this.reserved += ask;
      return;
    }
    const refusal = await this.bytes.reserve(this.owner, this.jobId, need);
    if (refusal) throw new SessionQuotaExceeded(refusal);
    this.reserved += need;
  }

  /** Joins the account of the PUTs writing `file` now; `size` is its size at open (read synchronously). */
  begin(file: string, size: number): void {
    const key = `${this.jobId}\0${file}`;
    let a = accounts.get(key);
    if (!a) accounts.set(key, (a = { charged: size, pooled: 0, users: 0 }));
    a.users++;
    this.account = { key, a };
  }

  /**
   * Charges the file's actual change in size: unused reservation and freed bytes are given back.
   * With an account (`sizeAfter` read synchronously before the call), the growth since the last
   * settle is paid from the pooled reservations, and what is left is given back by the last writer.
   */
  async settle(sizeBefore: number, sizeAfter: number): Promise<void> {
    const acc = this.account;
    if (acc) {
      this.account = undefined;
      acc.a.pooled += this.reserved - (sizeAfter - acc.a.charged);
      acc.a.charged = sizeAfter;
      this.reserved = 0;
      if (--acc.a.users > 0) return;
      accounts.delete(acc.key);
      if (acc.a.pooled > 0) await this.bytes.release(this.owner, this.jobId, acc.a.pooled);
      return;
    }
    const delta = sizeAfter - sizeBefore;
    if (delta < this.reserved) await this.bytes.release(this.owner, this.jobId, this.reserved - delta);
    this.reserved = 0;
  }
}

/** The session-bytes quota and upload completion of one job's session, for one request. */
export class SessionAccounts {
  private readonly bytes: SessionBytes;
  private readonly tracker: UploadTracker;

  constructor(
    private readonly services: Services,
    private readonly job: JobRecord,
  ) {
    const { config, redis, jobs } = services;
    this.bytes = new SessionBytes(redis, jobs.keys.prefix, {
      perJob: config.quotas.sessionBytesPerJob,
      perOwner: config.quotas.sessionBytesPerOwner,
    });
    this.tracker = new UploadTracker(redis, jobs.keys.prefix, {
      maxRanges: config.gateway.limits.uploadRanges,
      maxFiles: config.gateway.limits.partialUploadsPerJob,
    });
  }

  /** The quota of one PUT into this job's session. */
  uploadQuota(): UploadQuota {
    return new UploadQuota(this.bytes, this.job.owner, this.job.id);
  }

  /**
   * Bytes [start, start+received) of `path` arrived (all of it without a range). Once the file is
   * whole: input_status (append) and the JEM's doorbell, only while the job waits for inputs
   * (@ce/store owns that rule). Returns whether the file is complete.
   */
  async uploaded(path: string, range: ContentRange | undefined, received: number): Promise<boolean> {
    const complete = await this.tracker.record(this.job.id, path, range, received);
    if (complete) await completeUpload(this.services.control, this.job, path, () => this.services.advance.ring([this.job.id]));
    return complete;
  }

  /**
   * `path` was deleted (`removed` bytes in it): its bookkeeping is forgotten and its bytes, or all
   * of the job's for the session root, no longer count against the quota.
   */
  async deleted(path: string, removed: number): Promise<void> {
    await this.tracker.forget(this.job.id, path);
    const freed = path === "/" ? (await this.bytes.usage(this.job.owner, this.job.id)).job : removed;
    await this.bytes.release(this.job.owner, this.job.id, freed);
  }
}
