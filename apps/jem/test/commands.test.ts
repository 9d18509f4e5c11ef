import { existsSync } from "node:fs";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import {
  letJemSee,
  output,
  sendCommand,
  shellJob,
  submitTestJob,
  testEnv,
  testJem,
  transitionsOf,
  waitFor,
  waitForRest,
  type TestEnv,
} from "./helpers.js";
import { quietPeriod } from "@ce/testing";

let env: TestEnv;
let jem: Jem;

beforeAll(async () => {
  env = await testEnv({ jobs: { uploadTimeoutSeconds: 60 } });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("kill", () => {
  it("kills a job before it reaches the batch system (waiting for an upload)", async () => {
    const id = await submitTestJob(env, shellJob("true", { inputFiles: [{ name: "in.dat", executable: false, options: {} }] }));
    await waitForRest(env, id, "PREPARING");
    await sendCommand(env, "kill", id);
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"]);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failure).toBe("Job is canceled by external request");
    expect(r?.failedState).toBe("PREPARING");
    expect(r?.failedCause).toBe("client");
    expect(r?.localId).toBeUndefined();
  });

  it("kills a running job through CANCELING (KILLING) and keeps useIfCancel outputs", async () => {
    const id = await submitTestJob(
      env,
      shellJob("echo partial > log.txt; echo x > other.txt; sleep 30", {
        outputFiles: [
          output("log.txt", { useIfCancel: true }),
          output("other.txt", { target: "https://127.0.0.1:1/x", useIfCancel: false }),
        ],
      }),
    );
    await waitForRest(env, id, "RUNNING", 10_000);
    await sendCommand(env, "kill", id);
    await sendCommand(env, "kill", id); // idempotent
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failedState).toBe("INLRMS");
    const steps = (await transitionsOf(env, id)).map((t) => t.to);
    expect(steps).toContain("CANCELING");
    expect(steps.filter((s) => s === "CANCELING")).toHaveLength(1);
    expect(existsSync(join(env.control.sessionDir(id), "log.txt"))).toBe(true);
    expect(existsSync(join(env.control.sessionDir(id), "other.txt"))).toBe(false);
    await waitFor("status FINISHED", async () => (await env.control.read(id, "status"))?.trim() === "FINISHED");
  });

  it("a kill of a finished job changes nothing", async () => {
    const id = await submitTestJob(env, shellJob("true"));
    await waitForRest(env, id, "FINISHED");
    await sendCommand(env, "kill", id);
    await quietPeriod(500, "the JEM has a chance to act on the kill, and must not");
    const r = await env.jobs.get(id);
    expect(r?.rest).toBe("FINISHED");
    expect(r?.killRequested).toBeFalsy();
  });

  it("a kill while submitting is deferred until the batch id exists", async () => {
    const id = await submitTestJob(env, shellJob("sleep 30"), {}, { notify: false });
    // Put the job into SUBMIT by hand, then kill before the JEM sees it.
    const r = (await env.jobs.get(id))!;
    expect(await env.jobs.update({ ...r, state: "PREPARING" }, { state: "SUBMIT" })).toBeTruthy();
    await sendCommand(env, "kill", id);
    await waitFor("kill flag", async () => (await env.jobs.get(id))?.killRequested);
    await letJemSee(env, id);
    const end = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(end?.rest).toBe("KILLED");
    expect(end?.localId).toBeTruthy(); // it was submitted, then cancelled
    expect(end?.failedState).toBe("INLRMS");
  });
});

describe("restart", () => {
  it("restarts a failed job, which then runs again and succeeds", async () => {
    const marker = join(await mkdtemp(join(tmpdir(), "jem-rerun-")), "ran-once");
    const id = await submitTestJob(
      env,
      shellJob(`if [ -e ${marker} ]; then echo second > out.txt; exit 0; fi; touch ${marker}; exit 1`, {
        rerun: 1,
        outputFiles: [output("out.txt")],
      }),
      { rerun: 1 },
    );
    const failed = await waitForRest(env, id, ["FAILED", "FINISHED"]);
    expect(failed?.rest).toBe("FAILED");
    const firstLocal = failed?.localId;
    await sendCommand(env, "restart", id);
    await sendCommand(env, "restart", id); // the second one finds nothing to restart (or a running job)
    const r = await waitFor("second run", async () => {
      const j = await env.jobs.get(id);
      return j && j.rest === "FINISHED" ? j : undefined;
    });
    expect(r.rerun).toBe(0);
    expect(r.failure).toBeUndefined();
    expect(r.localId).not.toBe(firstLocal);
    expect(await env.control.read(id, "failed")).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id), "out.txt"), "utf8")).toBe("second\n");
    const steps = (await transitionsOf(env, id)).map((t) => t.to);
    expect(steps.filter((s) => s === "SUBMIT")).toHaveLength(2);
    expect(steps).toContain("PENDING:PREPARING");
  });

  it("refuses a restart without reruns left", async () => {
    const id = await submitTestJob(env, shellJob("exit 2"));
    await waitForRest(env, id, "FAILED");
    await sendCommand(env, "restart", id);
    await waitFor("refusal logged", async () => (await env.control.read(id, "errors"))?.includes("Restart refused"));
    expect((await env.jobs.get(id))?.rest).toBe("FAILED");
  });
});

describe("clean", () => {
  it("removes a finished job completely", async () => {
    const id = await submitTestJob(env, shellJob("echo x > out.txt", { outputFiles: [output("out.txt")] }));
    await waitForRest(env, id, "FINISHED");
    await sendCommand(env, "clean", id);
    await waitForRest(env, id, "GONE");
    expect(existsSync(env.control.sessionDir(id))).toBe(false);
    expect(existsSync(env.control.jobDir(id))).toBe(false);
    expect(await env.redis.sismember(env.jobs.keys.internal("FINISHED"), id)).toBe(0);
  });

  it("defers the clean of an active job until it finishes (not a kill)", async () => {
    const marker = join(await mkdtemp(join(tmpdir(), "jem-clean-")), "ran-to-the-end");
    const id = await submitTestJob(env, shellJob(`sleep 1.5; touch ${marker}`));
    await waitForRest(env, id, "RUNNING", 10_000);
    await sendCommand(env, "clean", id);
    await waitFor("clean flag", async () => (await env.jobs.get(id))?.cleanRequested);
    const seen = new Set<string>();
    await waitFor(
      "job removed",
      async () => {
        const r = await env.jobs.get(id);
        if (r) seen.add(r.rest);
        return !r;
      },
      20_000,
      20,
    );
    expect(seen.has("KILLING")).toBe(false);
    expect(existsSync(marker)).toBe(true); // it ran to the end
    expect(existsSync(env.control.jobDir(id))).toBe(false);
    expect(existsSync(env.control.sessionDir(id))).toBe(false);
  });
});
