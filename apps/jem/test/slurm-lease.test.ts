import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { compileConfig } from "@ce/config";
import { PoolLeases, onJobWiped } from "@ce/mapping";
import { pino } from "pino";
import { TestAccounts } from "@ce/mapping/testing";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { accountScrubber } from "../src/contain/scrub.js";
import { waitFor } from "@ce/testing";

// Issue 21: with Slurm, a pool account's lease is held until the batch system lists none of the
// account's jobs. A real single-node Slurm, a real account that submits a job of its own: while
// squeue shows it, the release keeps the lease (reason naming squeue) and the next identity gets
// another account; once it is cancelled and gone from squeue, the release succeeds.

const ROOT = TestAccounts.available();
if (!HAS_SLURM) console.warn("slurm-lease.test.ts SKIPPED: slurm-wlm/munge not installed");
const log = pino({ level: "silent" });

describe.skipIf(!ROOT || !HAS_SLURM)("a pool lease and the account's Slurm jobs", () => {
  const accounts = new TestAccounts();
  let cluster: SlurmCluster;
  let redis: Redis;
  let acct: string;
  let other: string;
  let tmp: string;
  let savedConf: string | undefined;

  beforeAll(async () => {
    cluster = await startSlurm(`/tmp/ce-slurm-l${process.pid}`);
    // The scrub runs squeue with the JEM's own environment, as the JEM does.
    savedConf = process.env.SLURM_CONF;
    process.env.SLURM_CONF = cluster.conf;
    acct = await accounts.add("sl");
    other = await accounts.add("so");
    redis = new Redis(inject("redisUrl"));
    tmp = mkdtempSync(join(tmpdir(), "ce-slurm-lease-"));
    mkdirSync(join(tmp, "t"), { mode: 0o1777 });
  }, 120_000);
  afterAll(async () => {
    if (acct) spawnSync("scancel", ["-u", acct], { env: { ...process.env } });
    cluster?.stop();
    if (savedConf === undefined) delete process.env.SLURM_CONF;
    else process.env.SLURM_CONF = savedConf;
    await redis?.quit();
    await accounts.remove();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  const squeue = () => execFileSync("squeue", ["-h", "-u", acct, "-o", "%i %T"], { encoding: "utf8" }).trim();

  it("keeps the lease while squeue lists a job of the account, and releases it once it is gone", async () => {
    const squeueBin = execFileSync("sh", ["-c", "command -v squeue"], { encoding: "utf8" }).trim();
    const config = compileConfig({ lrms: { backend: "slurm", slurm: { binPath: dirname(squeueBin) } }, mapping: { leaseGraceSeconds: 0 } });
    // What the privileged JEM hands to releases (src/priv/jobs.ts leaseScrub), on stand-in temp dirs.
    const scrub = accountScrubber({
      config,
      log,
      tempDirs: [join(tmp, "t")],
      cronSpools: [join(tmp, "cron")],
      atSpools: [join(tmp, "at")],
    });
    expect(scrub).toBeDefined();

    // The account's own job, submitted as the account (a job of the previous holder).
    const sub = spawnSync(
      "runuser",
      ["-u", acct, "--", "sbatch", "--parsable", "--chdir=/", "--output=/dev/null", "--job-name=leftover", "--wrap", "sleep 120"],
      {
        encoding: "utf8",
        env: { ...process.env, SLURM_CONF: cluster.conf },
      },
    );
    expect(sub.status, sub.stderr).toBe(0);
    const jobId = sub.stdout.trim().split(";")[0]!;
    expect(jobId).toMatch(/^\d+$/);
    // Running on the node, as a leftover of the previous holder would be.
    await waitFor(`job ${jobId} running`, () => squeue() === `${jobId} RUNNING`, 60_000, { everyMs: 300, detail: squeue });

    const prefix = `{sl-${randomBytes(4).toString("hex")}}`;
    const leases = new PoolLeases(redis, prefix);
    const owner = "/DC=org/CN=Previous Holder";
    expect(await leases.lease(owner, "pool", [acct, other])).toBe(acct);

    // The identity has no job left in the CE (all wiped), the grace time is over: the release is due,
    // but Slurm still lists the account's job.
    const kept = await onJobWiped(redis, prefix, owner, config.mapping, scrub);
    expect(kept).toMatchObject({ kept: "dirty" });
    expect((kept as { reason: string }).reason).toMatch(new RegExp(`squeue lists 1 job\\(s\\) of ${acct}.*${jobId}`));
    expect(await leases.holder(acct)).toBe(owner);
    // The next identity does not get the account while the job is there.
    expect(await leases.lease("/DC=org/CN=Next Holder", "pool", [acct, other])).toBe(other);

    execFileSync("scancel", [jobId]);
    await waitFor(`job ${jobId} gone from squeue`, () => squeue() === "", 60_000, { everyMs: 300, detail: squeue });

    expect(await onJobWiped(redis, prefix, owner, config.mapping, scrub)).toEqual({ released: 1 });
    expect(await leases.holder(acct)).toBeUndefined();
    expect(await leases.lease("/DC=org/CN=Third Holder", "pool", [acct])).toBe(acct);
  }, 120_000);

  it("keeps the lease when squeue cannot answer", async () => {
    // No squeue where the configuration says Slurm's commands are: the scrub cannot tell, so the lease stays.
    const config = compileConfig({ lrms: { backend: "slurm", slurm: { binPath: join(tmp, "no-bin") } } });
    const scrub = accountScrubber({ config, log, tempDirs: [join(tmp, "t")], cronSpools: [], atSpools: [] })!;
    expect(await scrub(acct)).toBe(`squeue cannot list the jobs of ${acct}`);
  }, 60_000);
});
