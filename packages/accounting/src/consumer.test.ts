import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { JobStore, Keys, type JobRecord } from "@ce/store";
import { AccountingDb } from "./db/index.js";
import { UsageConsumer, USAGE_GROUP } from "./consumer.js";
import { quietPeriod } from "@ce/testing";

// The terminal move's script (packages/store lua/update.lua) appends the usage entry; the consumer
// writes it to a real SQLite file and acknowledges it only after the commit.
let redis: Redis;
let jobs: JobStore;
let dir: string;
let db: AccountingDb;
const prefix = `{acct-test-${process.pid}}`;
const keys = new Keys(prefix);
const log = pino({ level: "silent" });

async function clear() {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
}
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  jobs = new JobStore(redis, prefix);
});
beforeEach(async () => {
  await clear();
  dir = mkdtempSync(join(tmpdir(), "acct-"));
  db = await AccountingDb.open(undefined, dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => {
  await clear();
  redis.disconnect();
});

let n = 0;
/** A job in FINISHING, as the JEM has it just before its terminal move. */
async function finishingJob(over: Partial<JobRecord> = {}): Promise<JobRecord> {
  const base = JobStore.newRecord({
    id: `acct${++n}x`,
    owner: "/DC=org/CN=Alice",
    queue: "main",
    backend: "slurm",
    language: "xrsl",
    delegations: [],
    rerun: 2,
    lifetime: 60,
  });
  const r = { ...base, ...over } as JobRecord;
  await jobs.create([r], 1000);
  let cur = (await jobs.get(r.id))!;
  for (const to of ["PREPARING", "SUBMIT", "INLRMS", "FINISHING"] as const) cur = (await jobs.update(cur, { state: to, pending: false }))!;
  return cur;
}

async function finish(job: JobRecord, change: Partial<JobRecord> = {}, usage: Record<string, string | number> = {}) {
  return jobs.update(
    job,
    { ...change, state: "FINISHED", outcome: change.outcome ?? "success", endedAt: Date.now() },
    { state: job.state, stateSince: String(job.stateSince) },
    usage,
  );
}

const consumer = (name: string, claimIdleMs = 60_000) =>
  new UsageConsumer({ redis, prefix, db, consumer: name, claimIdleMs, vomslessVo: "ops-none", log, blockMs: 10 });

describe("usage stream", () => {
  it("the terminal move appends exactly one entry; a replayed move and other moves append none", async () => {
    const job = await finishingJob({
      fqans: ["/atlas/Role=production", "/atlas"],
      localUser: { account: "atlas001", uid: 5001, gid: 5000, groups: [5000], rule: "r" },
    });
    expect(await redis.xlen(keys.usageStream())).toBe(0);
    const done = await finish(
      job,
      { localId: "42", usedWallSeconds: 100, usedUserSeconds: 80, usedSystemSeconds: 5, usedCpuSeconds: 85, processors: 2 },
      { bytesIn: 10, benchmarkType: "HEPscore23", benchmarkValue: 16.5 },
    );
    expect(done).toBeDefined();
    // The same move again (a stale copy: ioredis replay, a second JEM) loses the CAS: no entry.
    expect(await finish(job)).toBeUndefined();
    const entries = await redis.xrange(keys.usageStream(), "-", "+");
    expect(entries).toHaveLength(1);
    const f = Object.fromEntries(entries[0]![1].reduce<[string, string][]>((a, v, i, all) => (i % 2 ? a : [...a, [v, all[i + 1]!]]), []));
    expect(f).toMatchObject({
      id: job.id,
      recordId: `${job.id}/2`,
      localId: "42",
      "u.bytesIn": "10",
      "u.benchmarkType": "HEPscore23",
      "u.benchmarkValue": "16.5",
    });
  });

  it("the consumer writes each record once, acknowledges and removes the entry", async () => {
    const job = await finishingJob({
      fqans: ["/atlas/Role=production", "/atlas"],
      localUser: { account: "atlas001", uid: 5001, gid: 5000, groups: [5000], rule: "r" },
    });
    await finish(
      job,
      { localId: "42", usedWallSeconds: 100, usedUserSeconds: 80, usedSystemSeconds: 5, usedCpuSeconds: 85, processors: 2, nodes: "n1" },
      { bytesIn: 10, bytesOut: 20, benchmarkType: "HEPscore23", benchmarkValue: 16.5, partition: "batch" },
    );
    const c = consumer("a");
    await c.ensureGroup();
    expect(await c.step(false)).toBe(1);
    const [r] = await db.job(job.id);
    expect(r).toMatchObject({
      recordId: `${job.id}/2`,
      batchId: "42",
      ownerDn: "/DC=org/CN=Alice",
      vo: "atlas",
      voGroup: "/atlas",
      voRole: "Role=production",
      fqan: "/atlas/Role=production",
      fqans: ["/atlas/Role=production", "/atlas"],
      account: "atlas001",
      uid: 5001,
      queue: "main",
      partition: "batch",
      wallSeconds: 100,
      cpuUserSeconds: 80,
      cpuSystemSeconds: 5,
      cpuSeconds: 85,
      processors: 2,
      nodeCount: 1,
      state: "FINISHED",
      bytesIn: 10,
      bytesOut: 20,
      benchmarkType: "HEPscore23",
      benchmarkValue: 16.5,
    });
    expect(await redis.xlen(keys.usageStream())).toBe(0);
    expect((await redis.xpending(keys.usageStream(), USAGE_GROUP))[0]).toBe(0);
  });

  it("a token job takes its VO from wlcg.groups; a job with neither gets the VOMS-less VO", async () => {
    const tok = await finishingJob({ owner: "https://iss.example/u-123", fqans: ["/cms/production", "/cms"] });
    const plain = await finishingJob({ owner: "/DC=org/CN=Bob" });
    await finish(tok, { outcome: "failed", failedCause: "user", failure: "exit 3", exitCode: 3 });
    await finish(plain, { outcome: "killed", failedCause: "client" });
    const c = consumer("a");
    await c.ensureGroup();
    await c.step(false);
    expect((await db.job(tok.id))[0]).toMatchObject({
      vo: "cms",
      voGroup: "/cms/production",
      voRole: null,
      tokenIssuer: "https://iss.example",
      tokenSubject: "u-123",
      ownerDn: null,
      state: "FAILED",
      exitCode: 3,
    });
    expect((await db.job(plain.id))[0]).toMatchObject({ vo: "ops-none", voGroup: "/ops-none", fqan: null, state: "KILLED" });
  });

  it("a rerun is a new record", async () => {
    const job = await finishingJob();
    const ended = (await finish(job, { outcome: "failed", failedState: "INLRMS", failure: "x" }))!;
    // The restart (states/restart.ts) lowers `rerun` and moves the job back; it ends again.
    let again = (await jobs.update(ended, {
      state: "INLRMS",
      pending: true,
      rerun: ended.rerun - 1,
      outcome: undefined,
      failure: undefined,
    }))!;
    again = (await jobs.update(again, { state: "FINISHING", pending: false }))!;
    await finish(again);
    const c = consumer("a");
    await c.ensureGroup();
    while ((await c.step(false)) > 0);
    expect((await db.job(job.id)).map((r) => r.recordId).sort()).toEqual([`${job.id}/1`, `${job.id}/2`]);
  });

  it("entries a dead consumer read but never acknowledged are taken over, and none is written twice", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const j = await finishingJob();
      ids.push(j.id);
      await finish(j);
    }
    const dead = consumer("dead");
    await dead.ensureGroup();
    // The dead consumer read all five and committed the first two, then died before XACK.
    const read = (await redis.xreadgroup("GROUP", USAGE_GROUP, "dead", "COUNT", 5, "STREAMS", keys.usageStream(), ">")) as [
      string,
      [string, string[]][],
    ][];
    expect(read[0]![1]).toHaveLength(5);
    const { entryFields, usageRecord } = await import("./record.js");
    await db.insert(
      read[0]![1].slice(0, 2).map(([id, f]) => ({ record: usageRecord(id, entryFields(f), { vomslessVo: "x" }), streamId: id })),
    );
    // Another JEM: nothing of its own pending, nothing idle long enough yet.
    const live = consumer("live", 50);
    expect(await live.step(false)).toBe(0);
    await quietPeriod(80, "the other consumer's entries must be idle longer than the 50 ms claim time");
    expect(await live.step(false)).toBe(5);
    expect(await db.count()).toBe(5);
    for (const id of ids) expect(await db.job(id)).toHaveLength(1);
    expect((await redis.xpending(keys.usageStream(), USAGE_GROUP))[0]).toBe(0);
  });

  it("a database that refuses the write leaves the entries pending; they are written once it works", async () => {
    const j = await finishingJob();
    await finish(j);
    const c = consumer("a");
    await c.ensureGroup();
    await db.close();
    await expect(c.step(false)).rejects.toThrow();
    expect((await redis.xpending(keys.usageStream(), USAGE_GROUP))[0]).toBe(1);
    db = await AccountingDb.open(undefined, dir);
    expect(await consumer("a").step(false)).toBe(1);
    expect(await db.job(j.id)).toHaveLength(1);
  });

  it("a consumer SIGKILLed between its database commit and its acknowledgement loses and doubles nothing", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 150; i++) {
      const j = await finishingJob();
      ids.push(j.id);
      await finish(j);
    }
    await db.close();
    const run = (env: Record<string, string>) =>
      spawnSync(process.execPath, ["--import", "tsx", new URL("./consumer.kill.fixture.ts", import.meta.url).pathname], {
        env: { ...process.env, REDIS_URL: inject("redisUrl"), PREFIX: prefix, DB_PATH: join(dir, "accounting", "accounting.db"), ...env },
        encoding: "utf8",
        timeout: 60_000,
      });
    const killed = run({ CONSUMER: "victim", KILL_AFTER_COMMIT: "1" });
    expect(killed.signal).toBe("SIGKILL");
    db = await AccountingDb.open(undefined, dir);
    // Committed but never acknowledged: the first batch is in the database and still pending.
    const committed = await db.count();
    expect(committed).toBeGreaterThan(0);
    expect(committed).toBeLessThan(150);
    expect(Number((await redis.xpending(keys.usageStream(), USAGE_GROUP))[0])).toBe(committed);
    // Another JEM's consumer takes the dead one's entries over once they are idle, and the rest.
    const rescue = run({ CONSUMER: "rescuer", CLAIM_IDLE_MS: "1" });
    expect(rescue.status, rescue.stderr).toBe(0);
    expect(await db.count()).toBe(150);
    for (const id of ids) expect(await db.job(id)).toHaveLength(1);
    expect(await redis.xlen(keys.usageStream())).toBe(0);
    expect((await redis.xpending(keys.usageStream(), USAGE_GROUP))[0]).toBe(0);
  }, 120_000);
});
