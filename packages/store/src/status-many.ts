import type { Redis } from "ioredis";
import { isRestState, type RestState } from "@ce/model";
import type { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/** Ids per script call: a call holds Redis for ~1 µs per id, so a 10,000-id request is cut up. */
export const STATUS_BATCH_IDS = 1_000;

/** What can travel space-separated (lua/status-many.lua): printable ASCII without spaces. */
const SENDABLE = /^[\x21-\x7e]+(?: [\x21-\x7e]+)*$/;
const SENDABLE_ID = /^[\x21-\x7e]+$/;

interface Group {
  owner: string;
  /** The job keys, space-separated. */
  keys: string;
  /** First key (the routing key of the call). */
  first: string;
  done: (states: string) => void;
  fail: (err: unknown) => void;
}

/**
 * Bulk status reads (JobStore.statesOwnedBy), coalesced: reads go to Redis as one script call
 * (lua/status-many.lua) carrying each read's (owner, ids) pair, at most STATUS_BATCH_IDS ids per
 * call. A read waits for the end of the event-loop turn it was asked in, and while a call is in
 * flight, for its answer: reads arriving meanwhile go together in the next call (group commit).
 * Alone, a read costs no wait beyond its turn; under load one call serves many requests (one
 * command to build and write instead of one each, one script run in Redis). The owner check stays
 * in Redis, per read. A call always settles (the gateway's connection has a command timeout).
 */
export class StatusReader {
  private groups: Group[] = [];
  private ids = 0;
  private scheduled = false;
  private inFlight = 0;

  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** REST state per id (undefined: missing, another owner's, or not a possible id). */
  async read(ids: readonly string[], owner: string): Promise<(RestState | undefined)[]> {
    if (ids.length === 0) return [];
    // Ids the script cannot take (spaces, control or non-ASCII characters, empty) name no job:
    // not found, without asking. The route only lets listed-id syntax through (services/idlist.ts).
    let send: readonly string[] = ids;
    let joined = ids.join(" ");
    if (!SENDABLE.test(joined)) {
      send = ids.filter((id) => SENDABLE_ID.test(id));
      joined = send.join(" ");
    }
    const parts: Promise<string[]>[] = [];
    const prefix = this.keys.jobKeyPrefix();
    for (let i = 0; i < send.length; i += STATUS_BATCH_IDS) {
      const chunk = send.length <= STATUS_BATCH_IDS ? send : send.slice(i, i + STATUS_BATCH_IDS);
      // Keys.job(id) = prefix + id, for every id at once.
      parts.push(this.enqueue(owner, prefix + (chunk === send ? joined : chunk.join(" ")).replaceAll(" ", ` ${prefix}`), chunk));
    }
    const got = parts.length === 1 ? await parts[0]! : (await Promise.all(parts)).flat();
    if (got.length !== send.length) throw new Error(`status-many: ${got.length} states for ${send.length} ids`);
    const states = got.map((s) => (isRestState(s) ? s : undefined));
    if (send === ids) return states;
    let k = 0;
    return ids.map((id) => (SENDABLE_ID.test(id) ? states[k++] : undefined));
  }

  private enqueue(owner: string, keys: string, ids: readonly string[]): Promise<string[]> {
    return new Promise<string[]>((resolve, reject) => {
      // A full call goes at once (a big read is cut into full calls: they need not wait).
      if (this.ids + ids.length > STATUS_BATCH_IDS) this.send();
      this.groups.push({ owner, keys, first: ids[0]!, done: (s) => resolve(s.split(",")), fail: reject });
      this.ids += ids.length;
      if (!this.scheduled && this.inFlight === 0) {
        this.scheduled = true;
        // After this turn's I/O callbacks: the status requests that arrived together go together.
        setImmediate(() => {
          this.scheduled = false;
          if (this.inFlight === 0) this.send();
        });
      }
    });
  }

  private send(): void {
    const groups = this.groups;
    if (groups.length === 0) return;
    this.groups = [];
    this.ids = 0;
    const args: string[] = [];
    for (const g of groups) args.push(g.owner, g.keys);
    this.inFlight++;
    runScript(this.redis, "ceStatusMany", [this.keys.job(groups[0]!.first)], args).then(
      (reply) => {
        this.settled();
        const rows = reply as string[];
        if (!Array.isArray(rows) || rows.length !== groups.length) {
          const err = new Error(`status-many: ${Array.isArray(rows) ? rows.length : typeof rows} replies for ${groups.length} requests`);
          for (const g of groups) g.fail(err);
          return;
        }
        groups.forEach((g, i) => g.done(rows[i]!));
      },
      (err: unknown) => {
        this.settled();
        for (const g of groups) g.fail(err);
      },
    );
  }

  /** A call ended: the reads that waited for it go now. */
  private settled(): void {
    if (--this.inFlight === 0 && !this.scheduled) this.send();
  }
}
