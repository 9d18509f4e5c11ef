import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

/**
 * Issue 33, part 4: `@list` outputs cost the JEM entries × listed names in FINISHING (27–50 s
 * for 20,000 files and five 10,000-line lists). Through the JEM: the job writes the files and the
 * lists, FINISHING purges the session; its time is taken from the JEM's own state-change log lines.
 */
describe("output lists at FINISHING", () => {
  let env: TestEnv;
  let jem: Jem;
  const moves: Array<{ jobId: string; to: string; time: number; failure?: string }> = [];

  beforeAll(async () => {
    env = await testEnv({ staging: { maxOutputListLines: 50_000 } });
    const sink = {
      write(line: string) {
        const o = JSON.parse(line) as { msg?: string; jobId?: string; to?: string; time: number; failure?: string };
        if (o.msg === "state change" && o.jobId && o.to) moves.push({ jobId: o.jobId, to: o.to, time: o.time, failure: o.failure });
      },
    };
    jem = await testJem(env, { logger: pino({ level: "debug" }, sink) });
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
  });

  /** 20,000 files in d/, and `lists` lists of 10,000 names each of files that do not exist. */
  const script = (lists: number) =>
    [
      "mkdir d && (cd d && seq 1 20000 | sed 's/^/f/' | xargs touch)",
      `for i in $(seq 1 ${lists}); do seq 1 10000 | sed "s|^|d/missing-$i-|" > list$i; done`,
      "echo done > result.txt",
    ].join(" && ");
  const lists = (n: number) => Array.from({ length: n }, (_, i) => output(`@list${i + 1}`));
  const timeOf = (id: string, to: string) => moves.find((m) => m.jobId === id && m.to === to);

  it("20,000 files and five 10,000-line lists: FINISHING takes at most 10 s", async () => {
    const id = await submitTestJob(env, shellJob(script(5), { outputFiles: [output("result.txt"), ...lists(5)] }));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 180_000);
    expect(r?.failure).toBeUndefined();
    const from = timeOf(id, "FINISHING");
    const to = timeOf(id, "FINISHED");
    expect(from && to).toBeTruthy();
    const ms = to!.time - from!.time;
    console.log(`FINISHING with 20,000 files and 5 × 10,000 listed names: ${ms} ms`);
    expect(ms).toBeLessThanOrEqual(10_000);
    // The purge did its work: the unlisted files went, the lists and the result stayed.
    const session = env.control.sessionDir(id);
    expect((await readdir(session)).sort()).toEqual(["d", "list1", "list2", "list3", "list4", "list5", "result.txt"]);
    expect(await readdir(join(session, "d"))).toEqual([]);
  }, 240_000);

  it("lists over staging.maxOutputListLines together fail the job at FINISHING with a reason naming the cap", async () => {
    const id = await submitTestJob(env, shellJob(script(6), { outputFiles: [output("result.txt"), ...lists(6)] }));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 180_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failedState).toBe("FINISHING");
    expect(r?.failure).toContain(
      "output list /list6: 60000 lines with the lists before it, more than the 50000 one job's output lists may have together (staging.maxOutputListLines)",
    );
    expect(timeOf(id, "FINISHED")!.time - timeOf(id, "FINISHING")!.time).toBeLessThanOrEqual(10_000);
  }, 240_000);
});
