import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, transitionsOf, waitFor, waitForRest, type TestEnv } from "./helpers.js";

let env: TestEnv;
let jem: Jem;

beforeAll(async () => {
  env = await testEnv({ jobs: { sessionLifetimeSeconds: 1, wipedRecordSeconds: 1 } });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("expiry", () => {
  it("FINISHED → WIPED (session gone, minimal record) → removed", async () => {
    const id = await submitTestJob(env, shellJob("echo x > out.txt", { outputFiles: [output("out.txt")] }));
    const fin = await waitForRest(env, id, "FINISHED");
    expect(fin!.cleanupAt! - fin!.endedAt!).toBe(1000);
    const wiped = await waitForRest(env, id, "WIPED", 10_000);
    expect(wiped?.state).toBe("DELETED");
    expect(wiped?.removeAt).toBeGreaterThan(Date.now() - 1000);
    expect(existsSync(env.control.sessionDir(id))).toBe(false);
    const left = (await readdir(env.control.jobDir(id))).sort();
    expect(left).toEqual(expect.arrayContaining(["local", "status", "xml"]));
    expect(left).not.toContain("errors");
    expect(left).not.toContain("spec");
    await waitFor("xml arcrest:WIPED", async () => (await env.control.read(id, "xml"))?.includes("arcrest:WIPED"));
    await waitForRest(env, id, "GONE", 10_000);
    expect(existsSync(env.control.jobDir(id))).toBe(false);
    expect(await env.redis.zscore(env.jobs.keys.expiry(), id)).toBeNull();
  });

  it("a job's own lifetime can only shorten the session lifetime", async () => {
    const id = await submitTestJob(env, shellJob("true"), { lifetime: 3600 });
    const fin = await waitForRest(env, id, "FINISHED");
    expect(fin!.cleanupAt! - fin!.endedAt!).toBe(1000);
    expect((await transitionsOf(env, id)).at(-1)?.to).toBe("FINISHED");
  });
});

describe("orphaned submissions", () => {
  it("files of a submission that never committed are removed; a committed one is kept", async () => {
    const { randomUUID } = await import("node:crypto");
    const { sweepOrphans, ORPHAN_AFTER_MS } = await import("../src/expiry.js");
    // A gateway that died after writing files: marked, files on disk, no record.
    const orphan = randomUUID();
    await env.control.createJobDirs(orphan);
    await env.control.write(orphan, "description", "&(executable=/bin/true)");
    // A job whose mark was left behind although it committed (the unmark failed).
    const live = await submitTestJob(env, shellJob("true"));
    const old = Date.now() - ORPHAN_AFTER_MS - 1000;
    await env.jobs.markCreating([orphan, live], old);
    // A recent mark is a submission still in progress: not touched.
    const inFlight = randomUUID();
    await env.control.createJobDirs(inFlight);
    await env.jobs.markCreating([inFlight]);

    expect(await sweepOrphans(jem.ctx)).toBe(1);
    expect(existsSync(env.control.jobDir(orphan))).toBe(false);
    expect(existsSync(env.control.sessionDir(orphan))).toBe(false);
    expect(existsSync(env.control.jobDir(live))).toBe(true);
    expect(existsSync(env.control.jobDir(inFlight))).toBe(true);
    expect(await env.jobs.staleCreating(Date.now())).toEqual([inFlight]);
    await env.jobs.doneCreating([inFlight]);
    // The live job runs detached under fork: let it end before the temp dirs are removed.
    expect((await waitForRest(env, live, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
  });
});
