import { type ActivityInput, activityJson, activityXml, glueTime } from "@ce/glue2";

/**
 * Bulk info's rendered activities, per job and format, kept while the job record's revision
 * (`rev`, @ce/store record.ts) stays the same: a client polling info for the same jobs then costs
 * one HGET per job in Redis and a join here, instead of 27 fields read, decoded and rendered per
 * job. Only the document's CreationTime (the time of the request) differs between two answers, so
 * a text is kept as the two parts around it. Each gateway has its own; Redis's `rev` decides what
 * is still right, so gateways stay stateless. Bounded by the characters held, least recently used
 * out first.
 */

export type ActivityFormat = "json" | "xml";

export interface ActivityText {
  /** The record revision the text was rendered from. */
  readonly rev: number;
  /** The job's owner (the record's `owner`): an entry answers only its owner. */
  readonly owner: string;
  /** The text up to CreationTime's value, and from its end. */
  readonly pre: string;
  readonly post: string;
}

interface Held extends ActivityText {
  readonly size: number;
}

/** Rendered with this request time, then cut around it (callers building the input may pass it as `now`). */
export const STAMP_DATE = new Date(Date.UTC(2000, 0, 1));
const STAMP = glueTime(STAMP_DATE);
// JSON: `_attributes` is the activity's last member and a string value's quotes are escaped, so the
// last unescaped `"CreationTime":"` is the attribute. XML: the attributes open the text.
const JSON_AT = `"CreationTime":"${STAMP}"`;
const XML_AT = ` CreationTime="${STAMP}"`;

/** An activity's text in `fmt`, cut around its CreationTime. `input.now` is ignored. */
export function renderActivityText(input: ActivityInput, fmt: ActivityFormat, rev: number, owner: string): ActivityText {
  const stamped = input.now === STAMP_DATE ? input : { ...input, now: STAMP_DATE };
  const text = fmt === "json" ? activityJson(stamped) : activityXml(stamped);
  const at = fmt === "json" ? text.lastIndexOf(JSON_AT) : text.indexOf(XML_AT);
  if (at < 0) throw new Error(`activity ${fmt} text without its CreationTime`);
  const cut = at + (fmt === "json" ? JSON_AT : XML_AT).length - STAMP.length - 1;
  return { rev, owner, pre: text.slice(0, cut), post: text.slice(cut + STAMP.length) };
}

/** The whole text for a request at `stamp` (glueTime of its time). */
export function activityTextAt(t: ActivityText, stamp: string): string {
  return t.pre + stamp + t.post;
}

export class ActivityCache {
  private readonly held = new Map<string, Held>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  private static key(fmt: ActivityFormat, id: string): string {
    return (fmt === "json" ? "j" : "x") + id;
  }

  /** The entry held for a job, if any (not yet known to be current: compare its `rev`). */
  peek(fmt: ActivityFormat, id: string): ActivityText | undefined {
    return this.held.get(ActivityCache.key(fmt, id));
  }

  /** Marks an entry used (it goes to the back of the eviction order). */
  touch(fmt: ActivityFormat, id: string, t: ActivityText): void {
    const k = ActivityCache.key(fmt, id);
    const h = this.held.get(k);
    if (h !== t) return;
    this.held.delete(k);
    this.held.set(k, h);
  }

  put(fmt: ActivityFormat, id: string, t: ActivityText): void {
    const k = ActivityCache.key(fmt, id);
    const size = t.pre.length + t.post.length + k.length + t.owner.length + 64;
    if (size > this.maxChars) return;
    const old = this.held.get(k);
    if (old) {
      this.chars -= old.size;
      this.held.delete(k);
    }
    this.held.set(k, { ...t, size });
    this.chars += size;
    for (const [ek, e] of this.held) {
      if (this.chars <= this.maxChars) break;
      this.held.delete(ek);
      this.chars -= e.size;
    }
  }

  /** Characters held (for tests and metrics). */
  get size(): number {
    return this.chars;
  }
}
