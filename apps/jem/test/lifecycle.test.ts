import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import {
  clientUpload,
  letJemSee,
  output,
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
  env = await testEnv({ jobs: { uploadTimeoutSeconds: 2 } });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("job lifecycle", () => {
  it("runs a job to FINISHED, keeps declared outputs only, logs every state change", async () => {
    const id = await submitTestJob(
      env,
      shellJob("echo hello > out.txt; echo junk > scratch.txt; echo to-stdout", {
        stdout: "stdout.txt",
        outputFiles: [output("out.txt"), output("stdout.txt")],
      }),
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FINISHED");
    expect(r?.exitCode).toBe(0);
    expect(r?.cleanupAt).toBeGreaterThan(Date.now());
    const session = env.control.sessionDir(id);
    expect((await readdir(session)).sort()).toEqual(["out.txt", "stdout.txt"]);
    expect(await readFile(join(session, "out.txt"), "utf8")).toBe("hello\n");
    expect(await readFile(join(session, "stdout.txt"), "utf8")).toBe("to-stdout\n");
    await waitFor("status file", async () => (await env.control.read(id, "status"))?.trim() === "FINISHED");
    await waitFor("status FINISHED", async () => (await env.control.read(id, "status"))?.trim() === "FINISHED");
    expect(await env.control.read(id, "local")).toMatch(/localid=\S+/);
    const steps = (await transitionsOf(env, id)).map((t) => t.to);
    expect(steps).toEqual(["PREPARING", "SUBMIT", "INLRMS", "FINISHING", "FINISHED"]);
    expect(await env.control.read(id, "failed")).toBeUndefined();
  });

  it("a non-zero exit code ends FAILED with the LRMS reason", async () => {
    const id = await submitTestJob(env, shellJob("exit 3"));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("LRMS error: (3) The executable exited with code 3");
    expect(r?.failedState).toBe("INLRMS");
    // The payload's own failure is the user's to fix, not the site's.
    expect(r?.failedCause).toBe("user");
    expect(await env.control.read(id, "failed")).toMatch(/LRMS error: \(3\)/);
    await waitFor("status FINISHED", async () => (await env.control.read(id, "status"))?.trim() === "FINISHED");
  });

  it("a missing executable is the user's mistake and says which", async () => {
    const id = await submitTestJob(env, { executable: "/no/such/program" });
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("LRMS error: (127) Executable /no/such/program not found");
    expect(r?.failedCause).toBe("user");
  });

  it("a successExitCode other than 0 is honoured", async () => {
    const id = await submitTestJob(env, shellJob("exit 7", { successExitCode: 7 }));
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
  });

  it("dryRun fails at ACCEPTED with a clear reason and is not restartable", async () => {
    const id = await submitTestJob(env, shellJob("true", { dryRun: true }));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("Job has dryrun requested. Job skipped.");
    expect(r?.failedState).toBeUndefined();
    expect(r?.localId).toBeUndefined();
  });

  it("a data-only job (no executable) skips the batch system", async () => {
    const id = await submitTestJob(env, {
      executable: undefined,
      inputFiles: [{ name: "data.txt", executable: false, options: {} }],
      outputFiles: [output("data.txt")],
    });
    await waitForRest(env, id, "PREPARING");
    await clientUpload(env, id, "data.txt", "payload");
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FINISHED");
    expect(r?.localId).toBeUndefined();
    expect((await transitionsOf(env, id)).map((t) => t.to)).not.toContain("SUBMIT");
    expect(await readFile(join(env.control.sessionDir(id), "data.txt"), "utf8")).toBe("payload");
  });

  it("waits for client uploads and uses them", async () => {
    const id = await submitTestJob(
      env,
      shellJob("cat in.txt > out.txt", {
        inputFiles: [{ name: "in.txt", executable: false, options: {}, size: 5 }],
        outputFiles: [output("out.txt")],
      }),
    );
    await waitForRest(env, id, "PREPARING");
    await quietPeriod(300, "without the upload the job must stay in PREPARING");
    expect((await env.jobs.get(id))?.rest).toBe("PREPARING");
    await clientUpload(env, id, "in.txt", "12345");
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
    expect(await readFile(join(env.control.sessionDir(id), "out.txt"), "utf8")).toBe("12345");
  });

  it("an upload that never completes fails the job with the timeout reason", async () => {
    const id = await submitTestJob(env, shellJob("true", { inputFiles: [{ name: "never.dat", executable: false, options: {} }] }));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 10_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("User file: never.dat - Timeout waiting for upload");
    expect(r?.failedState).toBe("PREPARING");
  });

  it("honours startTime", async () => {
    const start = new Date(Date.now() + 1_500);
    const id = await submitTestJob(env, shellJob("true", { startTime: start }));
    await quietPeriod(700, "before its startTime the job must not start");
    expect((await env.jobs.get(id))?.rest).toBe("ACCEPTING");
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FINISHED");
    expect(r!.created).toBeLessThan(start.getTime());
    expect((await transitionsOf(env, id)).length).toBeGreaterThan(0);
  });

  it("a missing spec fails the job without a restart point", async () => {
    const id = await submitTestJob(env, shellJob("true"), {}, { notify: false });
    await env.control.remove(id, "spec");
    await letJemSee(env, id);
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBe("Could not process job description");
    expect(existsSync(env.control.sessionDir(id))).toBe(true);
  });

  it("reports the batch sub-state while running", async () => {
    const id = await submitTestJob(env, shellJob("sleep 2"));
    await waitForRest(env, id, "RUNNING", 10_000);
    expect(await waitFor("RUNNING", async () => (await env.jobs.get(id))?.rest === "RUNNING")).toBe(true);
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
  });
});
