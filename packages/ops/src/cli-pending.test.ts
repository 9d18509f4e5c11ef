import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JobStore, Keys } from "@ce/store";

// `ceadm jobs list --pending` (issue 36): the jobs waiting in the batch system with the batch
// system's reason as the JEM's poll left it on each record, narrowed by owner, summed per reason.

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../..", import.meta.url));
const prefix = `{ops-p-${randomBytes(4).toString("hex")}}`;
let redis: Redis;

async function ceadm(...args: string[]): Promise<{ code: number; stdout: string }> {
  const env = { ...process.env, CE__REDIS__URL: inject("redisUrl"), CE__REDIS__PREFIX: prefix, CE_CONFIG: "" };
  try {
    const { stdout } = await run(process.execPath, ["--import", "tsx", "packages/ops/src/cli.ts", ...args], { cwd: root, env });
    return { code: 0, stdout };
  } catch (e) {
    const err = e as { code: number; stdout: string };
    return { code: err.code, stdout: err.stdout };
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  const store = new JobStore(redis, prefix);
  const k = new Keys(prefix);
  const rec = (id: string, owner: string, fqans?: string[]) =>
    JobStore.newRecord({ id, owner, queue: "main", backend: "slurm", language: "xrsl", delegations: [], rerun: 0, lifetime: 60, fqans });
  await store.create(
    [
      rec("p1", "/DC=org/CN=alice", ["/atlas/Role=pilot"]),
      rec("p2", "/DC=org/CN=bob"),
      rec("p3", "/DC=org/CN=alice"),
      rec("p4", "/DC=org/CN=carol"),
    ],
    100,
  );
  // As the JEM's poll leaves them (p4 runs: no reason shown; p3 waits without one).
  const inlrms = async (id: string, fields: Record<string, string>) => {
    await redis
      .multi()
      .hset(k.job(id), { state: "INLRMS", pending: "0", rest: "QUEUING", ...fields })
      .smove(k.internal("ACCEPTED"), k.internal("INLRMS"), id)
      .exec();
  };
  await inlrms("p1", { lrms: "QUEUING", lrmsReason: "QOSMaxJobsPerUserLimit" });
  await inlrms("p2", { lrms: "HELD", lrmsReason: "JobHeldAdmin" });
  await inlrms("p3", { lrms: "QUEUING" });
  await inlrms("p4", { lrms: "RUNNING", lrmsReason: "Priority" });
});
afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

describe("ceadm jobs list --pending", () => {
  it("lists every waiting job with its reason, and the sums per reason", async () => {
    const r = await ceadm("--json", "jobs", "list", "--pending");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.total).toBe(3);
    expect(out.jobs).toEqual([
      { id: "p2", queue: "main", vo: "", lrms: "HELD", reason: "JobHeldAdmin" },
      { id: "p3", queue: "main", vo: "", lrms: "QUEUING", reason: "none" },
      { id: "p1", queue: "main", vo: "atlas", lrms: "QUEUING", reason: "QOSMaxJobsPerUserLimit" },
    ]);
    expect(out.byReason).toHaveLength(3);
    const human = await ceadm("jobs", "list", "--pending");
    expect(human.stdout).toMatch(/^p1\s+main\s+atlas\s+QUEUING\s+QOSMaxJobsPerUserLimit$/m);
    expect(human.stdout).toContain("3 of 3 waiting job(s)");
  }, 60_000);

  it("--owner narrows it to one owner's jobs", async () => {
    const out = JSON.parse((await ceadm("--json", "jobs", "list", "--pending", "--owner", "/DC=org/CN=alice")).stdout);
    expect(out.jobs.map((j: { id: string }) => j.id).sort()).toEqual(["p1", "p3"]);
  }, 60_000);
});
