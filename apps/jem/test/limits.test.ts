import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { underLimit } from "../src/limits.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitFor, type TestEnv } from "./helpers.js";
import { quietPeriod } from "@ce/testing";

/** Random small delays that interleave the racing callers differently on each run. */
const jitter = (ms: number) => quietPeriod(ms, "interleave the racing callers");

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
    const ids = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        submitTestJob(env, shellJob(`sleep 0.3; echo ${i} > out.txt`, { outputFiles: [output("out.txt")] })),
      ),
    );
    const seen = new Set<string>();
    await waitFor(
      "all finished",
      async () => {
        const recs = await env.jobs.getMany(ids);
        for (const r of recs) if (r) seen.add(r.rest);
        return recs.every((r) => r?.rest === "FINISHED");
      },
      40_000,
      20,
    );
    expect(seen.has("ACCEPTED")).toBe(true); // PENDING:ACCEPTED (owner limit)
    expect(seen.has("PREPARED")).toBe(true); // PENDING:PREPARING (maxInLrms)
    for (const id of ids) {
      const errors = (await env.control.read(id, "errors")) ?? "";
      expect(errors.match(/-> SUBMIT /g)?.length).toBe(1);
    }
  }, 60_000);

  // Looks of a burst check one limit together; moves commit after a delay, as a transition does.
  const burst = async (name: string, limit: number, n: number) => {
    let committed = 0;
    let peak = 0;
    let leases = 0;
    const locks = jem.ctx.locks;
    const tryAcquire = locks.tryAcquire.bind(locks);
    locks.tryAcquire = (key, ms) => ((leases += key === `limit:${name}` ? 1 : 0), tryAcquire(key, ms));
    const count = async () => {
      await jitter(Math.random() * 3);
      return committed;
    };
    try {
      const free = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          await jitter((i % 7) * 2);
          return underLimit(jem.ctx, name, limit, count, async (ok) => {
            if (ok) {
              await jitter(1 + Math.random() * 8);
              peak = Math.max(peak, ++committed);
            }
            return ok;
          });
        }),
      );
      return { moved: free.filter(Boolean).length, peak, leases };
    } finally {
      locks.tryAcquire = tryAcquire;
    }
  };

  it("a burst far below the limit moves without the lease; near it never past the limit", async () => {
    // As many looks as workers against twice that (maxStaging 100, 50 workers by default): each
    // look of a burst that shared a count took the lease before, one at a time.
    const workers = jem.ctx.config.jem.concurrency;
    expect(await burst("far", 2 * workers, workers)).toEqual({ moved: workers, peak: workers, leases: 0 });
    for (let round = 0; round < 5; round++) {
      const near = await burst(`near${round}`, 7, 60);
      expect(near.peak).toBeLessThanOrEqual(7);
      expect(near.moved).toBe(near.peak);
      expect(near.moved).toBeGreaterThan(0);
    }
  });
});
