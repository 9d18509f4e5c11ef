import { afterEach, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, transitionsOf, waitFor, type TestEnv } from "./helpers.js";
import { killHard, spawnJem } from "./support/child.js";

const NORMAL = ["PREPARING", "SUBMIT", "INLRMS", "FINISHING", "FINISHED"];

let env: TestEnv | undefined;
const jems: Jem[] = [];
afterEach(async () => {
  await Promise.all(jems.splice(0).map((j) => j.stop()));
  await env?.close();
  env = undefined;
});

async function allFinished(e: TestEnv, ids: string[], timeoutMs: number) {
  return waitFor(
    `${ids.length} jobs FINISHED`,
    async () => {
      const recs = await e.jobs.getMany(ids);
      return recs.every((r) => r?.rest === "FINISHED") ? recs : undefined;
    },
    timeoutMs,
    200,
  );
}

describe("crash and concurrency safety", () => {
  it("a JEM killed with SIGKILL in the middle of 20 jobs: a new JEM finishes all of them", async () => {
    env = await testEnv();
    const e = env;
    const child = await spawnJem(e.config);
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        submitTestJob(e, shellJob(`sleep 0.${3 + (i % 5)}; echo ${i} > out.txt`, { outputFiles: [output("out.txt")] })),
      ),
    );
    // Kill it while work is spread over several states.
    await waitFor(
      "progress",
      async () => {
        const recs = await e.jobs.getMany(ids);
        return recs.filter((r) => r && r.state !== "ACCEPTED").length >= 5;
      },
      20_000,
      10,
    );
    await killHard(child);
    const before = await e.jobs.getMany(ids);
    expect(before.some((r) => r?.rest !== "FINISHED")).toBe(true);

    jems.push(await testJem(e));
    const recs = await allFinished(e, ids, 60_000);
    expect(recs.every((r) => r?.exitCode === 0)).toBe(true);
    for (const id of ids) {
      const steps = (await transitionsOf(e, id)).map((t) => t.to);
      expect(steps).toEqual(NORMAL);
    }
  }, 90_000);

  it("two JEMs at once advance every job exactly once", async () => {
    env = await testEnv();
    const e = env;
    jems.push(await testJem(e), await testJem(e));
    const ids = await Promise.all(
      Array.from({ length: 30 }, (_, i) => submitTestJob(e, shellJob(`echo ${i} > out.txt`, { outputFiles: [output("out.txt")] }))),
    );
    await allFinished(e, ids, 60_000);
    for (const id of ids) {
      expect((await transitionsOf(e, id)).map((t) => t.to)).toEqual(NORMAL);
      expect(await e.control.read(id, "errors")).not.toMatch(/adopted|submitting again/);
    }
  }, 90_000);
});
