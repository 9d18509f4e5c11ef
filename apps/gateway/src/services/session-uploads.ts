import type { Redis } from "ioredis";
import { BadRequest } from "../errors.js";

/**
 * Upload-completion bookkeeping (arex-rest.md E6 `FileChunks`, arex-jem.md §5.2). A file counts as
 * uploaded when one PUT carried it whole, or when the byte ranges of partial PUTs
 * (`Content-Range: bytes a-b/total`) together cover [0,total). The ranges live in Redis, one hash
 * per job (`<prefix>:up:<jobId>`, field = normalized path), so partial PUTs may land on any gateway.
 */

/** A request `Content-Range: bytes a-b/total` (`total` may be `*` = unknown). */
export interface ContentRange {
  start: number;
  end: number;
  total: number | undefined;
}

export function parseContentRange(header: string | undefined): ContentRange | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(header);
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

// Merges [s,e) into the stored, sorted, coalesced range list; a different total restarts the
// bookkeeping (a new upload of the file). Returns 1 and forgets the file when [0,total) is covered.
const MERGE = `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local s, e, total = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local rec = {t = total, r = {}}
if raw then
  local ok, old = pcall(cjson.decode, raw)
  if ok and old.t == total and type(old.r) == 'table' then rec = old end
end
table.insert(rec.r, {s, e})
table.sort(rec.r, function(x, y) return x[1] < y[1] end)
local merged = {}
for _, iv in ipairs(rec.r) do
  local last = merged[#merged]
  if last and iv[1] <= last[2] then
    if iv[2] > last[2] then last[2] = iv[2] end
  else
    merged[#merged + 1] = {iv[1], iv[2]}
  end
end
if #merged == 1 and merged[1][1] <= 0 and merged[1][2] >= total then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
rec.r = merged
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(rec))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 0
`;

type WithMerge = Redis & { ceUploadMerge(key: string, field: string, s: number, e: number, total: number, ttlMs: number): Promise<number> };

function withMerge(redis: Redis): WithMerge {
  if (!("ceUploadMerge" in redis)) redis.defineCommand("ceUploadMerge", { numberOfKeys: 1, lua: MERGE });
  return redis as WithMerge;
}

/** How long partial-upload bookkeeping survives without activity. */
const TTL_MS = 7 * 24 * 3600 * 1000;

export class UploadTracker {
  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  key(jobId: string): string {
    return `${this.prefix}:up:${jobId}`;
  }

  /**
   * Records that bytes [start, start+received) of `path` arrived. Returns true when the file is
   * now complete. Without a Content-Range the PUT carried the whole file.
   */
  async record(jobId: string, path: string, range: ContentRange | undefined, received: number): Promise<boolean> {
    if (!range) {
      await this.redis.hdel(this.key(jobId), path);
      return true;
    }
    if (range.total === undefined) return false; // total unknown: cannot tell
    if (received === 0) return false;
    const end = Math.min(range.start + received, range.total);
    return (await withMerge(this.redis).ceUploadMerge(this.key(jobId), path, range.start, end, range.total, TTL_MS)) === 1;
  }

  /** Forgets bookkeeping below a deleted path (the whole job for "/"). */
  async forget(jobId: string, path: string): Promise<void> {
    const key = this.key(jobId);
    if (path === "/") {
      await this.redis.del(key);
      return;
    }
    const fields = await this.redis.hkeys(key);
    const gone = fields.filter((f) => f === path || f.startsWith(`${path}/`));
    if (gone.length) await this.redis.hdel(key, ...gone);
  }
}
