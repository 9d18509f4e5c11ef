import { describe, expect, it } from "vitest";
import { JobStore, type JobRecord } from "./jobs.js";
import { Keys, ownerKey } from "./keys.js";
import { STATUS_BATCH_IDS, StatusReader, packKeys } from "./status-many.js";
import { useTestRedis } from "./test-redis.js";
import { quietPeriod } from "@ce/testing";

// Bulk status reads (status-many.ts, lua/status-many.lua) against the real Redis.
const t = useTestRedis("sm");

let n = 0;
const rec = (owner: string): JobRecord =>
  JobStore.newRecord({
    id: `s${++n}-${Math.random().toString(36).slice(2)}`,
    owner,
    queue: "q",
    backend: "fork",
    language: "xrsl",
    delegations: [],
    rerun: 0,
    lifetime: 60,
  });

/** Counts the script calls a connection sends (EVALSHA/EVAL). */
function countCalls(jobs: JobStore): { calls: number } {
  const c = { calls: 0 };
  const orig = jobs.redis.sendCommand.bind(jobs.redis);
  jobs.redis.sendCommand = ((cmd: { name: string }) => {
    if (/^eval/i.test(cmd.name)) c.calls++;
    return orig(cmd as never);
  }) as typeof jobs.redis.sendCommand;
  return c;
}

describe("StatusReader", () => {
  it("reads of one turn share one script call, each checked against its own owner", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const [a, b] = [rec("alice"), rec("bob")];
    await jobs.create([a, b], 100);
    await jobs.statesOwnedBy([a.id], "alice"); // script loaded
    const c = countCalls(jobs);
    const [ra, rb, rc] = await Promise.all([
      jobs.statesOwnedBy([a.id, b.id, "nope"], "alice"),
      jobs.statesOwnedBy([a.id, b.id, b.id], "bob"),
      // An owner whose DN has spaces and commas (it is one argument, never split).
      jobs.statesOwnedBy([a.id], "/DC=org/CN=alice smith, jr"),
    ]);
    expect(ra).toEqual(["ACCEPTING", undefined, undefined]);
    expect(rb).toEqual([undefined, "ACCEPTING", "ACCEPTING"]);
    expect(rc).toEqual([undefined]);
    expect(c.calls).toBe(1);
  });

  it("answers from the owner's status index, kept by create, update and remove; records from before the index still answer", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const k = new Keys(t.prefix);
    const carol = `carol-${n}`;
    const [a, b] = [rec(carol), rec(carol)];
    await jobs.create([a, b], 100);
    const idx = k.ownerStates(ownerKey(carol));
    expect(await t.redis.hgetall(idx)).toEqual({ [a.id]: "ACCEPTING", [b.id]: "ACCEPTING" });
    const moved = await jobs.update(a, { state: "PREPARING" });
    expect(await t.redis.hget(idx, a.id)).toBe(moved!.rest);
    // What is answered comes from the index: a stale index entry would show.
    await t.redis.hset(idx, b.id, "QUEUING");
    expect(await jobs.statesOwnedBy([a.id, b.id], carol)).toEqual([moved!.rest, "QUEUING"]);
    // A record the index does not hold (created before it existed) is read from the record, owner checked.
    await t.redis.hdel(idx, b.id);
    expect(await jobs.statesOwnedBy([b.id], carol)).toEqual(["ACCEPTING"]);
    expect(await jobs.statesOwnedBy([b.id], "mallory")).toEqual([undefined]);
    await jobs.remove(a.id);
    expect(await t.redis.hexists(idx, a.id)).toBe(0);
    expect(await jobs.statesOwnedBy([a.id], carol)).toEqual([undefined]);
  });

  it("any id travels as it is: spaces, commas, control and non-ASCII characters, empty, long", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const a = rec("alice");
    await jobs.create([a], 100);
    const odd = [`${a.id} x`, "", "a,b", "é€😀", `${a.id}\n`, "x".repeat(300), "y".repeat(70_000)];
    // Records under exactly those keys: found for their owner only, in their places.
    for (const id of odd)
      await t.redis.hset(new Keys(t.prefix).job(id), "owner", "alice", "ownerKey", ownerKey("alice"), "rest", "RUNNING");
    expect(await jobs.statesOwnedBy([...odd, a.id], "alice")).toEqual([...odd.map(() => "RUNNING"), "ACCEPTING"]);
    expect(await jobs.statesOwnedBy([...odd, a.id], "bob")).toEqual([...odd.map(() => undefined), undefined]);
    // A space-separated pair names neither job.
    expect(await jobs.statesOwnedBy([`${a.id} ${a.id}`], "alice")).toEqual([undefined]);
  });

  it("packKeys is MessagePack: arrays past 15 items, strings of every length class", () => {
    const ids = Array.from({ length: 20 }, (_, i) => "i".repeat([1, 23, 24, 247, 248, 65_527, 65_528][i % 7]!));
    const b = packKeys("{p}:job:", ids);
    // Decoded by hand: array16 header, then each string's header and bytes.
    expect([b[0], b.readUInt16BE(1)]).toEqual([0xdc, 20]);
    let o = 3;
    for (const id of ids) {
      const n = 8 + id.length;
      const h = b[o]!;
      const [len, skip] =
        h >= 0xa0 && h <= 0xbf
          ? [h & 31, 1]
          : h === 0xd9
            ? [b[o + 1]!, 2]
            : h === 0xda
              ? [b.readUInt16BE(o + 1), 3]
              : [b.readUInt32BE(o + 1), 5];
      expect(len).toBe(n);
      expect(b.toString("latin1", o + skip, o + skip + len)).toBe(`{p}:job:${id}`);
      o += skip + len;
    }
    expect(o).toBe(b.length);
    expect(packKeys("p", ["a"])).toEqual(Buffer.from([0x91, 0xa2, 0x70, 0x61]));
  });

  it("more ids than one call takes are split over calls, in order", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const mine = [rec("alice"), rec("alice"), rec("alice")];
    await jobs.create(mine, 100);
    const ids = Array.from({ length: 2 * STATUS_BATCH_IDS + 7 }, (_, i) => (i % 700 === 3 ? mine[(i / 700) | 0]!.id : `missing-${i}`));
    const c = countCalls(jobs);
    const [got, small] = await Promise.all([jobs.statesOwnedBy(ids, "alice"), jobs.statesOwnedBy([mine[0]!.id], "alice")]);
    expect(got).toEqual(ids.map((id) => (id.startsWith("missing") ? undefined : "ACCEPTING")));
    expect(small).toEqual(["ACCEPTING"]);
    expect(c.calls).toBe(3);
  });

  it("reads asked while a call is in flight wait for it and then go together", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const a = rec("alice");
    await jobs.create([a], 100);
    await jobs.statesOwnedBy([a.id], "alice"); // script defined on t.redis
    const sent: number[] = [];
    // A slow Redis: each call answers 30 ms late.
    const slow = Object.assign(Object.create(t.redis) as typeof t.redis, {
      defineCommand: () => undefined,
      ceStatusMany: (...args: (string | number)[]) => {
        sent.push((args.length - 3) / 2); // numkeys, the key, the prefix, then (ownerKey, ids) per read
        return quietPeriod(30, "a slow Redis").then(() =>
          (t.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).ceStatusMany!(...args),
        );
      },
    });
    const r = new StatusReader(slow, new Keys(t.prefix));
    const turn = () => new Promise((res) => setImmediate(res));
    const first = r.read([a.id], "alice");
    await turn();
    const later = [r.read([a.id], "alice"), (await turn(), r.read(["x", a.id], "alice")), (await turn(), r.read([a.id], "bob"))];
    expect(await first).toEqual(["ACCEPTING"]);
    expect(await Promise.all(later)).toEqual([["ACCEPTING"], [undefined, "ACCEPTING"], [undefined]]);
    expect(sent).toEqual([1, 3]);
  });

  it("a failing call fails every read it carried", async () => {
    const broken = new StatusReader(
      Object.assign(Object.create(t.redis) as typeof t.redis, {
        ceStatusMany: () => Promise.reject(new Error("boom")),
        defineCommand: () => undefined,
      }),
      new Keys(t.prefix),
    );
    const both = await Promise.allSettled([broken.read(["a"], "x"), broken.read(["b"], "y")]);
    expect(both.map((s) => s.status)).toEqual(["rejected", "rejected"]);
    // The next turn's reads go on.
    expect(await new StatusReader(t.redis, new Keys(t.prefix)).read(["a"], "x")).toEqual([undefined]);
  });
});
