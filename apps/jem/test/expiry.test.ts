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
    // The record turns WIPED first, then the files go (same pass).
    await waitFor(
      "session dir and spare control files removed",
      async () => !existsSync(env.control.sessionDir(id)) && !existsSync(env.control.file(id, "spec")),
    );
    const left = (await readdir(env.control.jobDir(id))).sort();
    expect(left).toEqual(expect.arrayContaining(["local", "status"]));
    expect(left).not.toContain("errors");
    expect(left).not.toContain("spec");
    expect((await env.control.read(id, "status"))?.trim()).toBe("DELETED");
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

describe("lost records", () => {
  it("files of an id without a record are removed once old; live, recent and creating ids are kept", async () => {
    const { randomUUID } = await import("node:crypto");
    const { utimes, writeFile } = await import("node:fs/promises");
    const { sweepLostRecords, LOST_AFTER_MS } = await import("../src/lost-records.js");
    const old = new Date(Date.now() - LOST_AFTER_MS - 60_000);
    const age = async (id: string) => {
      await utimes(env.control.jobDir(id), old, old);
      await utimes(env.control.sessionDir(id), old, old);
    };
    // The record vanished (Redis restored from an older AOF): control + session with user data.
    const lost = randomUUID();
    await env.control.createJobDirs(lost);
    await env.control.write(lost, "description", "&(executable=/bin/true)");
    await writeFile(`${env.control.sessionDir(lost)}/data.bin`, "user data");
    await age(lost);
    // Only a session dir is left (removal crashed after the control dir went).
    const sessionOnly = randomUUID();
    await env.control.createJobDirs(sessionOnly);
    const { rm } = await import("node:fs/promises");
    await rm(env.control.jobDir(sessionOnly), { recursive: true });
    await age(sessionOnly).catch(() => undefined);
    await utimes(env.control.sessionDir(sessionOnly), old, old);
    // A live job with old files, a recent lost one, and an old one still marked creating.
    const live = await submitTestJob(env, shellJob("true"));
    expect((await waitForRest(env, live, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
    await age(live);
    const recent = randomUUID();
    await env.control.createJobDirs(recent);
    const creating = randomUUID();
    await env.control.createJobDirs(creating);
    await age(creating);
    await env.jobs.markCreating([creating]);

    expect(await sweepLostRecords(jem.ctx)).toBe(2);
    for (const id of [lost, sessionOnly]) {
      expect(existsSync(env.control.jobDir(id))).toBe(false);
      expect(existsSync(env.control.sessionDir(id))).toBe(false);
    }
    for (const id of [live, recent, creating]) expect(existsSync(env.control.jobDir(id))).toBe(true);
    await env.jobs.doneCreating([creating]);
    await env.control.removeAll(creating);
  });

  it("a Redis error stops the sweep before anything is removed", async () => {
    const { randomUUID } = await import("node:crypto");
    const { utimes } = await import("node:fs/promises");
    const { sweepLostRecords, LOST_AFTER_MS } = await import("../src/lost-records.js");
    const lost = randomUUID();
    await env.control.createJobDirs(lost);
    const old = new Date(Date.now() - LOST_AFTER_MS - 60_000);
    await utimes(env.control.jobDir(lost), old, old);
    await utimes(env.control.sessionDir(lost), old, old);
    const broken = {
      ...jem.ctx,
      jobs: Object.assign(Object.create(Object.getPrototypeOf(jem.ctx.jobs) as object), jem.ctx.jobs, {
        existing: () => Promise.reject(new Error("connection lost")),
      }),
    };
    await expect(sweepLostRecords(broken)).rejects.toThrow("connection lost");
    expect(existsSync(env.control.jobDir(lost))).toBe(true);
    expect(await sweepLostRecords(jem.ctx)).toBe(1);
  });
});
