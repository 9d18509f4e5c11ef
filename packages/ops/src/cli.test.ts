import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bullConnection, JobStore, Keys, openQueue } from "@ce/store";
import { table } from "./cli.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../..", import.meta.url));
const prefix = `{ops-c-${randomBytes(4).toString("hex")}}`;
let redis: Redis;

/** Spawns `ceadm` exactly as `pnpm ceadm` does (node --import tsx), configured through CE__* only. */
async function ceadm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, CE__REDIS__URL: inject("redisUrl"), CE__REDIS__PREFIX: prefix, CE_CONFIG: "" };
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "packages/ops/src/cli.ts", ...args], { cwd: root, env });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  const store = new JobStore(redis, prefix);
  const rec = (id: string, owner: string) => JobStore.newRecord({ id, owner, queue: "main", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 });
  const mapped = { ...rec("c1", "/DC=org/CN=alice"), localUser: { account: "grid007", uid: 5007, gid: 100, groups: [100, 5000], rule: "mapping.rules[1] pool atlas" } };
  await store.create([mapped, rec("c2", "/DC=org/CN=bob")], 100);
});
afterAll(async () => {
  await redis.quit();
});

describe("ceadm", () => {
  it("aligns table columns", () => {
    expect(table(["A", "BB"], [["xxx", 1], [undefined, 22]])).toBe("A    BB\nxxx  1\n-    22");
  });

  it("lists jobs as a table and as JSON, filtered by owner and state", async () => {
    const human = await ceadm("jobs", "list");
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+STATE\s+INTERNAL\s+QUEUE\s+CREATED\s+OWNER/);
    expect(human.stdout).toContain("/DC=org/CN=alice");
    expect(human.stdout).toContain("2 of 2 job(s)");
    const json = JSON.parse((await ceadm("--json", "jobs", "list", "--owner", "/DC=org/CN=bob", "--state", "ACCEPTING")).stdout);
    expect(json).toMatchObject({ total: 1, jobs: [{ id: "c2", rest: "ACCEPTING" }] });
    const bad = await ceadm("jobs", "list", "--state", "NOPE");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("unknown state NOPE");
  });

  it("shows one job, and fails cleanly for a missing one", async () => {
    const shown = JSON.parse((await ceadm("jobs", "show", "c1", "--json")).stdout);
    expect(shown).toMatchObject({ id: "c1", owner: "/DC=org/CN=alice", state: "ACCEPTED", localUser: { account: "grid007", uid: 5007, gid: 100 } });
    expect((await ceadm("jobs", "show", "c1")).stdout).toMatch(/localUser\s+grid007 \(uid 5007, gid 100, groups 100,5000; by mapping\.rules\[1\] pool atlas\)\n/);
    const missing = await ceadm("jobs", "show", "zz");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("job zz not found");
  });

  it("queues kill and clean commands and counts the queues", async () => {
    expect((await ceadm("jobs", "kill", "c1")).stdout).toContain("kill of job c1 queued");
    expect((await ceadm("jobs", "clean", "c2")).code).toBe(0);
    const counts = JSON.parse((await ceadm("queues", "--json")).stdout);
    expect(counts.commands).toMatchObject({ waiting: 2 });
    const human = (await ceadm("queues")).stdout;
    expect(human).toMatch(/^QUEUE\s+WAITING\s+ACTIVE\s+DELAYED\s+FAILED\s+COMPLETED\s+PAUSED/);
    expect(human).toMatch(/commands\s+2\s+0/);
    const q = openQueue("commands", bullConnection(inject("redisUrl")), prefix);
    try {
      expect((await q.getWaiting()).map((j) => j.data.action).sort()).toEqual(["clean", "kill"]);
    } finally {
      await q.close();
    }
  });

  it("switches drain on and off", async () => {
    expect((await ceadm("drain", "on")).stdout).toContain("new jobs are refused");
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBe("1");
    expect(JSON.parse((await ceadm("drain", "status", "--json")).stdout)).toMatchObject({ draining: true });
    expect((await ceadm("drain", "off")).stdout).toContain("not draining");
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBeNull();
    expect((await ceadm("drain", "maybe")).code).toBe(2);
  });

  it("prints jobs per state", async () => {
    const out = (await ceadm("stats")).stdout;
    expect(out).toMatch(/ACCEPTING\s+2/);
    expect(out).toMatch(/TOTAL\s+2/);
    expect(JSON.parse((await ceadm("stats", "--json")).stdout)).toMatchObject({ total: 2, states: { ACCEPTING: 2, RUNNING: 0 } });
  });

  it("shows the input cache's counters and files, and asks the JEMs for a clean", async () => {
    await redis.hset(new Keys(prefix).cacheStats(), { hits: 19, misses: 1, bytesSaved: 247 });
    expect(JSON.parse((await ceadm("cache", "stats", "--json")).stdout)).toMatchObject({ hits: 19, misses: 1, refused: 0, bytesSaved: 247, dirs: [] });
    const off = await ceadm("cache", "clean");
    expect(off.code).toBe(1);
    expect(off.stderr).toContain("no cache directories are configured");
    const dir = mkdtempSync(join(tmpdir(), "ceadm-cache-"));
    mkdirSync(join(dir, "data", "ab"), { recursive: true });
    writeFileSync(join(dir, "data", "ab", "ab12"), "cached");
    writeFileSync(join(dir, "data", "ab", "ab12.meta"), JSON.stringify({ url: "https://origin.test/f" }));
    const cfg = join(dir, "ce.yaml");
    writeFileSync(cfg, `staging:\n  cache:\n    dirs:\n      - path: ${dir}\n`);
    const listed = JSON.parse((await ceadm("--config", cfg, "cache", "list", "--json")).stdout);
    expect(listed).toMatchObject([{ hash: "ab12", url: "https://origin.test/f", size: 6, links: 0 }]);
    expect((await ceadm("--config", cfg, "cache", "clean")).stdout).toContain("cache clean requested");
    expect(await redis.get(new Keys(prefix).cacheCleanRequest())).not.toBeNull();
  });

  it("exits 2 with usage on an unknown command", async () => {
    const res = await ceadm("frobnicate");
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("usage: ceadm");
  });
});
