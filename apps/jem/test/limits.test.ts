import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitFor, type TestEnv } from "./helpers.js";

let env: TestEnv;
let jem: Jem;

beforeAll(async () => {
  env = await testEnv({ jobs: { maxActivePerOwner: 2, maxInLrms: 1, maxStaging: 1 } });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("limits", () => {
  it("per-owner and batch-slot limits park jobs as ACCEPTED / PREPARED; all finish as slots free", async () => {
    const ids = await Promise.all(Array.from({ length: 5 }, (_, i) => submitTestJob(env, shellJob(`sleep 0.3; echo ${i} > out.txt`, { outputFiles: [output("out.txt")] }))));
    const seen = new Set<string>();
    await waitFor("all finished", async () => {
      const recs = await env.jobs.getMany(ids);
      for (const r of recs) if (r) seen.add(r.rest);
      return recs.every((r) => r?.rest === "FINISHED");
    }, 40_000, 20);
    expect(seen.has("ACCEPTED")).toBe(true); // PENDING:ACCEPTED (owner limit)
    expect(seen.has("PREPARED")).toBe(true); // PENDING:PREPARING (maxInLrms)
    for (const id of ids) {
      const errors = (await env.control.read(id, "errors")) ?? "";
      expect(errors.match(/-> SUBMIT /g)?.length).toBe(1);
    }
  }, 60_000);
});
