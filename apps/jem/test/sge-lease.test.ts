import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { compileConfig } from "@ce/config";
import { PoolLeases, onJobWiped } from "@ce/mapping";
import { pino } from "pino";
import { TestAccounts } from "@ce/mapping/testing";
import { HAS_GRIDENGINE, startGridEngine, type GridEngineCluster } from "@ce/testing/gridengine";
import { accountScrubber, sgeJobs } from "../src/contain/scrub.js";

// With Grid Engine, a pool account's lease is held while `qstat -u <account>` lists a job of it,
// and when qstat cannot answer. Fixture qstat scripts for the answers; a real private cell and a
// real account with a held job of its own (held: it never starts, so nothing waits on the scheduler).

const log = pino({ level: "silent" });
const ROOT = TestAccounts.available();
if (!HAS_GRIDENGINE) console.warn("sge-lease.test.ts: the real-cell case is SKIPPED (scripts/ensure-system-deps.sh sge)");

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "ce-sge-lease-"));
  mkdirSync(join(tmp, "t"), { mode: 0o1777 });
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A directory holding a `qstat` that prints `out` and exits with `code`. */
function fakeQstat(name: string, out: string, code = 0): string {
  const bin = join(tmp, name);
  mkdirSync(bin);
  writeFileSync(join(bin, "qstat.out"), out);
  writeFileSync(join(bin, "qstat"), `#!/bin/sh\ncat "$(dirname "$0")/qstat.out"\nexit ${code}\n`);
  chmodSync(join(bin, "qstat"), 0o755);
  return bin;
}
const XML = (jobs: string) =>
  `<?xml version='1.0'?>\n<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">\n  <queue_info>\n${jobs}  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n`;
const job = (id: number, task?: number) =>
  `    <job_list state="running">\n      <JB_job_number>${id}</JB_job_number>\n      <state>r</state>\n${task ? `      <tasks>${task}</tasks>\n` : ""}    </job_list>\n`;

describe("qstat's answer for a pool account", () => {
  it("lists each job once (the running tasks of an array job are one job)", async () => {
    expect(await sgeJobs("u1", fakeQstat("two", XML(job(7) + job(9, 1) + job(9, 2))))).toEqual(["7", "9"]);
    expect(await sgeJobs("u1", fakeQstat("none", XML("")))).toEqual([]);
  });

  it("is no answer when qstat fails, is missing or prints anything but a whole XML document", async () => {
    expect(await sgeJobs("u1", fakeQstat("down", "", 1))).toBeUndefined();
    expect(await sgeJobs("u1", join(tmp, "no-bin"))).toBeUndefined();
    expect(await sgeJobs("u1", fakeQstat("cut", XML(job(7)).slice(0, 200)))).toBeUndefined();
    expect(await sgeJobs("u1", fakeQstat("text", "job-ID  prior   name\n"))).toBeUndefined();
  });
});

describe.skipIf(!ROOT || !HAS_GRIDENGINE)("a pool lease and the account's Grid Engine jobs (real cell)", () => {
  const accounts = new TestAccounts();
  let sge: GridEngineCluster;
  let redis: Redis;
  let acct: string;
  let other: string;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    sge = await startGridEngine(`/tmp/ce-sge-l${process.pid}`, { slots: 1 });
    // The scrub runs qstat with the JEM's own environment, as the JEM does.
    for (const [k, v] of Object.entries(sge.env)) [saved[k], process.env[k]] = [process.env[k], v];
    acct = await accounts.add("gl");
    other = await accounts.add("go");
    redis = new Redis(inject("redisUrl"));
  }, 120_000);
  afterAll(async () => {
    sge?.stop();
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    await redis?.quit();
    await accounts.remove();
  }, 60_000);

  it("keeps the lease while qstat lists a job of the account, releases it once qdel removed it, and keeps it when qstat cannot answer", async () => {
    const config = compileConfig({ lrms: { backend: "sge", sge: { binPath: "/usr/bin" } }, mapping: { leaseGraceSeconds: 0 } });
    const scrub = accountScrubber({ config, log, tempDirs: [join(tmp, "t")], cronSpools: [], atSpools: [] })!;
    const sub = spawnSync(
      "runuser",
      ["-u", acct, "--", "qsub", "-terse", "-h", "-wd", "/", "-o", "/dev/null", "-j", "y", "-b", "y", "/bin/true"],
      { encoding: "utf8" },
    );
    expect(sub.status, sub.stderr).toBe(0);
    const jobId = sub.stdout.trim();
    expect(jobId).toMatch(/^\d+$/);

    const prefix = `{gl-${randomBytes(4).toString("hex")}}`;
    const leases = new PoolLeases(redis, prefix);
    const owner = "/DC=org/CN=Previous Holder";
    expect(await leases.lease(owner, "pool", [acct, other])).toBe(acct);
    const kept = await onJobWiped(redis, prefix, owner, config.mapping, scrub);
    expect(kept).toMatchObject({ kept: "dirty", reason: `qstat lists 1 job(s) of ${acct} (ids ${jobId})` });
    expect(await leases.lease("/DC=org/CN=Next Holder", "pool", [acct, other])).toBe(other);

    // qmaster unreachable: fail closed.
    process.env.SGE_QMASTER_PORT = "1";
    try {
      expect(await scrub(acct)).toBe(`qstat cannot list the jobs of ${acct}`);
    } finally {
      process.env.SGE_QMASTER_PORT = sge.env.SGE_QMASTER_PORT;
    }

    // qdel of a held job that never started removes it from qstat at once.
    expect(spawnSync("qdel", [jobId]).status).toBe(0);
    expect(await sgeJobs(acct, "/usr/bin")).toEqual([]);
    expect(await onJobWiped(redis, prefix, owner, config.mapping, scrub)).toEqual({ released: 1 });
    expect(await leases.holder(acct)).toBeUndefined();
  }, 60_000);
});
