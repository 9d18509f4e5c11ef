import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TestAccounts } from "@ce/mapping/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { letJemSee, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

/**
 * A JEM killed during a submission leaves the `submitting` marker and whatever it had written; the
 * next attempt must rebuild what the back end needs instead of trusting it (issue 29: "Job
 * submission to LRMS failed: cannot read …/batch.env" after a crash soak). The state a kill
 * inside prepare-batch leaves: the batch dir made (by the CE, 0700) but not yet handed to the
 * account, no batch files in it. Mapping on, a real account (root only).
 */
const ROOT = TestAccounts.available();
const num = (args: string[]) => Number(execFileSync("id", args, { encoding: "utf8" }).trim());

describe.skipIf(!ROOT)("a submission resumed after a JEM crash", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem | undefined;
  let user: string;

  beforeAll(async () => {
    user = await accounts.add("rs");
    env = await testEnv({ mapping: { rules: [{ match: "*", user }], onNoMatch: "refuse", minUid: 1000 } });
    chmodSync(env.stateDir, 0o711); // mapped accounts reach their session and batch dirs by path
  });
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await accounts.remove();
  });

  it("prepares a half-made batch dir again and writes the batch files before the back end runs: the job FINISHES", async () => {
    const localUser = { account: user, uid: num(["-u", user]), gid: num(["-g", user]), groups: [], rule: "test" };
    const id = await submitTestJob(
      env,
      shellJob("id -u", { stdout: "who.txt", outputFiles: [output("who.txt")] }),
      { localUser },
      { notify: false },
    );
    // What the dead JEM left: an attempt recorded, the batch dir made but still the CE's (killed
    // between mkdir and chown), a temporary batch file never renamed.
    const jobDir = env.control.jobDir(id);
    writeFileSync(join(jobDir, "submitting"), `20250101000000Z 4242 tag=${id}.deadbeef\n`, { mode: 0o600 });
    const batch = env.control.batchDir(id);
    mkdirSync(batch, { mode: 0o700 });
    writeFileSync(join(batch, "batch.env.tmp-4242-x"), "JOB_ID='", { mode: 0o600 });

    jem = await testJem(env);
    await letJemSee(env, id);
    const rec = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(rec?.failure).toBeUndefined();
    expect(rec?.rest).toBe("FINISHED");
    expect(rec?.exitCode).toBe(0);
    expect(execFileSync("cat", [join(env.control.sessionDir(id), "who.txt")], { encoding: "utf8" }).trim()).toBe(String(localUser.uid));
  }, 60_000);
});
