import { AccountingDb } from "@ce/accounting";
import { createMetrics, type CeMetrics } from "@ce/ops";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { sendCommand, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// A job run by the real JEM (fork back end) leaves its usage record in the accounting database
// (SQLite under the state dir), written by the JEM's own consumer, and keeps it after the job is wiped.
let env: TestEnv;
let jem: Jem;
let db: AccountingDb;
let metrics: CeMetrics;

beforeAll(async () => {
  env = await testEnv({
    jobs: { queues: [{ name: "main", allow: [], partition: "part1", benchmark: { type: "HEPscore23", value: 16.5 } }] },
  });
  metrics = createMetrics({ defaultMetrics: false });
  jem = await testJem(env, { metrics });
  db = await AccountingDb.open(undefined, env.stateDir);
});
afterAll(async () => {
  await db?.close();
  await jem?.stop();
  await env?.close();
});

describe("accounting", () => {
  it("an ended job has exactly one usage record with the wrapper's facts and the queue's benchmark, kept after the clean", async () => {
    const id = await submitTestJob(env, shellJob("sleep 1; exit 4"), { fqans: ["/atlas/Role=production"] });
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"]))?.rest).toBe("FAILED");
    const [r] = await waitFor("usage record", async () => ((await db.job(id)).length ? db.job(id) : undefined));
    expect(r).toMatchObject({
      recordId: `${id}/${r!.recordId.split("/")[1]}`,
      jobId: id,
      vo: "atlas",
      voRole: "Role=production",
      queue: "main",
      partition: "part1",
      state: "FAILED",
      exitCode: 4,
      benchmarkType: "HEPscore23",
      benchmarkValue: 16.5,
    });
    expect(r!.wallSeconds).toBeGreaterThanOrEqual(1);
    expect(r!.batchId).toBeTruthy();
    // The same record counted once in the per-VO Prometheus counters.
    const counter = async (name: string) =>
      (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => v.labels.vo === "atlas")?.value;
    expect(await counter("ce_accounting_wall_seconds_total")).toBe(r!.wallSeconds);
    expect(await counter("ce_accounting_cpu_seconds_total")).toBe(r!.cpuSeconds);
    expect(await metrics.registry.metrics()).toMatch(/^ce_accounting_records_total\{vo="atlas",state="FAILED"\} 1$/m);
    await sendCommand(env, "clean", id);
    await waitFor("record gone", async () => (await env.jobs.get(id)) === undefined || (await env.jobs.get(id))?.state === "DELETED");
    expect(await db.job(id)).toHaveLength(1);
  });
});
