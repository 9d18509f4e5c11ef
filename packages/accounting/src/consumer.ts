import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { Keys } from "@ce/store";
import type { AccountingDb } from "./db/index.js";
import { BadUsageEntryError, entryFields, usageRecord, type UsageRecord } from "./record.js";

export const USAGE_GROUP = "accounting";
const BATCH = 100;
const RETRY_MS = 1_000;

export interface ConsumerOptions {
  /** A connection of its own: XREADGROUP BLOCK holds it. */
  redis: Redis;
  prefix: string;
  db: AccountingDb;
  /** Unique per process (hostname:pid): pending entries are per consumer. */
  consumer: string;
  /** An entry pending this long with another consumer is taken over (that consumer died). */
  claimIdleMs: number;
  vomslessVo: string;
  log: Logger;
  /** How long one read waits for new entries. */
  blockMs?: number;
  /** Called with the records that were new to the database (metrics). */
  onRecorded?: (recs: readonly UsageRecord[]) => void;
}

type Entry = [id: string, fields: string[]];

/**
 * Moves usage records from the Redis stream into the database: read (own pending entries first,
 * then entries a dead consumer left pending, then new ones), insert in one transaction (by record
 * id, so an entry seen twice is one row), and only then XACK + XDEL. A crash anywhere leaves the
 * entry pending; this consumer after a restart or another after `claimIdleMs` finishes it.
 */
export class UsageConsumer {
  private readonly stream: string;
  private stopped = false;
  private running: Promise<void> | undefined;
  private readonly blockMs: number;

  constructor(private readonly o: ConsumerOptions) {
    this.stream = new Keys(o.prefix).usageStream();
    this.blockMs = o.blockMs ?? 2_000;
  }

  async ensureGroup(): Promise<void> {
    try {
      // From the stream's start: entries appended before any consumer existed are records too.
      await this.o.redis.xgroup("CREATE", this.stream, USAGE_GROUP, "0", "MKSTREAM");
    } catch (e) {
      if (!/BUSYGROUP/.test((e as Error).message)) throw e;
    }
  }

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async loop(): Promise<void> {
    let failing = false;
    while (!this.stopped) {
      try {
        await this.ensureGroup();
        // Drain: repeat while there is work, then one blocking read for new entries.
        while (!this.stopped && (await this.step(false)) > 0);
        if (!this.stopped) await this.step(true);
        if (failing) this.o.log.info("accounting consumer resumed");
        failing = false;
      } catch (e) {
        if (!failing)
          this.o.log.warn({ err: e, reason: (e as Error).message }, "accounting consumer failed; entries stay pending and are retried");
        failing = true;
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }

  /**
   * One pass: own pending entries (left by a crash of this consumer or a failed commit), then
   * entries idle with a dead consumer, then new entries (blocking when `block`). Returns how many
   * entries were handled.
   */
  async step(block: boolean): Promise<number> {
    const { redis, consumer } = this.o;
    const mine = await this.read("0", false);
    if (mine.length) return this.handle(mine);
    const claimed = (await redis.xautoclaim(this.stream, USAGE_GROUP, consumer, this.o.claimIdleMs, "0-0", "COUNT", BATCH)) as [
      string,
      Entry[],
      string[]?,
    ];
    const taken = (claimed[1] ?? []).filter((e) => Array.isArray(e[1]));
    if (taken.length) {
      this.o.log.info({ entries: taken.length }, "accounting entries of an idle consumer taken over");
      return this.handle(taken);
    }
    const fresh = await this.read(">", block);
    return fresh.length ? this.handle(fresh) : 0;
  }

  private async read(from: "0" | ">", block: boolean): Promise<Entry[]> {
    const args: (string | number)[] = ["GROUP", USAGE_GROUP, this.o.consumer, "COUNT", BATCH];
    if (block) args.push("BLOCK", this.blockMs);
    args.push("STREAMS", this.stream, from);
    const res =
      (await (this.o.redis as unknown as { xreadgroup(...a: (string | number)[]): Promise<[string, Entry[]][] | null> }).xreadgroup(
        ...args,
      )) ?? [];
    // A pending entry deleted meanwhile comes back with null fields: nothing to record, just ack it.
    return res.flatMap(([, entries]) => entries);
  }

  private async handle(entries: Entry[]): Promise<number> {
    const good: { record: UsageRecord; streamId: string }[] = [];
    for (const [id, fields] of entries) {
      if (!Array.isArray(fields)) continue;
      try {
        good.push({ record: usageRecord(id, entryFields(fields), { vomslessVo: this.o.vomslessVo }), streamId: id });
      } catch (e) {
        // Not a usage record (never written by update.lua): kept in the log, not retried forever.
        if (!(e instanceof BadUsageEntryError)) throw e;
        this.o.log.error({ code: e.code, entryId: id, fields, reason: e.message }, "usage stream entry dropped");
      }
    }
    const added = await this.o.db.insert(good);
    // Committed: only now may the entries leave the stream.
    const ids = entries.map(([id]) => id);
    await this.o.redis
      .multi()
      .xack(this.stream, USAGE_GROUP, ...ids)
      .xdel(this.stream, ...ids)
      .exec();
    if (added.length) {
      this.o.log.info({ records: added.length, ids: added.map((r) => r.recordId) }, "usage records written");
      this.o.onRecorded?.(added);
    }
    return entries.length;
  }
}
