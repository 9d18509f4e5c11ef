import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildActivityDocument, renderXml } from "@ce/glue2";
import { createMetrics } from "@ce/ops";
import { activityInputFor, readPendingByReason, readPendingJobs, type JobRecord } from "@ce/store";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import type { Jem } from "../src/daemon.js";
import { sendCommand, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// Issue 36: the batch system's reason a job waits, from a REAL Slurm through the JEM's bulk poll to
// the job record, its info document (what `arcstat -l` prints), `ce_lrms_pending_jobs` and the
// pending list. A job with a Slurm begin time waits for `BeginTime`; `scontrol hold` (as root, the
// administrator) gives `JobHeldAdmin`, `scontrol uhold` `JobHeldUser`.

if (!HAS_SLURM) console.warn("lrms-reason.test.ts SKIPPED: slurm-wlm/munge not installed");

describe.skipIf(!HAS_SLURM)("the batch system's pending reason, end to end on real Slurm", () => {
  let cluster: SlurmCluster;
  let env: TestEnv;
  let jem: Jem;
  let savedConf: string | undefined;

  beforeAll(async () => {
    cluster = await startSlurm(`/tmp/ce-slurm-w${process.pid}`);
    // The JEM runs the back end's scripts with its own environment.
    savedConf = process.env.SLURM_CONF;
    process.env.SLURM_CONF = cluster.conf;
    // A begin time in Slurm itself (the description's startTime would keep the job in the CE until then).
    env = await testEnv({ lrms: { backend: "slurm", pollIntervalMs: 500, slurm: { extraDirectives: ["--begin=now+3600"] } } });
    jem = await testJem(env);
  }, 120_000);

  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    cluster?.stop();
    if (savedConf === undefined) delete process.env.SLURM_CONF;
    else process.env.SLURM_CONF = savedConf;
  }, 60_000);

  const record = (id: string) => env.jobs.get(id) as Promise<JobRecord>;
  const infoXml = async (id: string) =>
    renderXml(buildActivityDocument(activityInputFor(await record(id), { hostname: "ce.test" })), { declaration: false });

  it("BeginTime, then JobHeldAdmin within a minute of scontrol hold, then JobHeldUser; shown in the info, metric and list", async () => {
    const id = await submitTestJob(env, { executable: "/bin/true" }, { fqans: ["/testvo/Role=pilot"] });
    const queued = await waitFor(
      "BeginTime on the record",
      async () => {
        const r = await record(id);
        return r?.lrms === "QUEUING" && r.lrmsReason === "BeginTime" ? r : undefined;
      },
      60_000,
      200,
    );
    expect(queued.localId).toMatch(/^\d+$/);
    expect(await infoXml(id)).toContain("<OtherInfo>LRMSReason=BeginTime</OtherInfo>");

    const t0 = Date.now();
    execFileSync("scontrol", ["hold", queued.localId!], { env: process.env });
    await waitFor(
      "JobHeldAdmin on the record",
      async () => {
        const r = await record(id);
        return r?.lrms === "HELD" && r.lrmsReason === "JobHeldAdmin";
      },
      60_000,
      200,
    );
    expect(Date.now() - t0).toBeLessThan(60_000);
    const xml = await infoXml(id);
    expect(xml).toContain("<OtherInfo>LRMSReason=JobHeldAdmin</OtherInfo>");
    // OtherMessages is what `arcstat -l` prints ("Other Messages: LRMS: JobHeldAdmin").
    expect(xml).toContain("<OtherMessages>LRMS: JobHeldAdmin</OtherMessages>");
    expect(xml).toContain("<State>arcrest:HELD</State>");

    expect(await readPendingJobs(env.redis, env.config.redis.prefix)).toEqual([
      { id, queue: "main", vo: "testvo", lrms: "HELD", reason: "JobHeldAdmin" },
    ]);
    expect(await readPendingByReason(env.redis, env.config.redis.prefix, ["testvo"])).toEqual([
      { queue: "main", vo: "testvo", reason: "JobHeldAdmin", jobs: 1 },
    ]);
    const metrics = await createMetrics({
      redis: env.redis,
      prefix: env.config.redis.prefix,
      vos: ["testvo"],
      defaultMetrics: false,
    }).registry.metrics();
    expect(metrics).toContain('ce_lrms_pending_jobs{queue="main",vo="testvo",reason="JobHeldAdmin"} 1');

    execFileSync("scontrol", ["release", queued.localId!], { env: process.env });
    execFileSync("scontrol", ["uhold", queued.localId!], { env: process.env });
    await waitFor(
      "JobHeldUser on the record",
      async () => {
        const r = await record(id);
        return r?.lrms === "HELD" && r.lrmsReason === "JobHeldUser";
      },
      60_000,
      200,
    );

    await sendCommand(env, "kill", id);
    const done = await waitForRest(env, id, "KILLED", 60_000);
    // Over: no reason is shown any more, and the job leaves the pending sums.
    expect(activityInputFor(done!, { hostname: "ce.test" }).lrmsReason).toBeUndefined();
    expect(await readPendingByReason(env.redis, env.config.redis.prefix)).toEqual([]);
  }, 180_000);
});
