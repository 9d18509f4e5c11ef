import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { submitTestJob, testEnv, testJem, transitionsOf, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// State hooks (jobs.hooks) in a real JEM: an admission hook refuses a VO's job with its reason,
// passes others, and one that hangs neither stalls other jobs nor the job itself (timeout → pass);
// a FINISHED hook gets the job's id, state, owner and VO, as the configured account.

let env: TestEnv;
let jem: Jem;
let dir: string;
const asRoot = process.getuid?.() === 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ce-hooks-"));
  chmodSync(dir, 0o777); // the hook account writes its log here
  writeFileSync(
    join(dir, "admit.sh"),
    [
      '[ "$2" = ACCEPTED ] || { echo "wrong state $2"; exit 3; }',
      'case "$CE_JOB_VO" in',
      '  banned) echo "VO banned has used its CPU quota for this month"; echo "detail on stderr" >&2; exit 1 ;;',
      `  slow) touch ${dir}/slow-started; sleep 30 ;;`,
      "esac",
      "exit 0",
    ].join("\n"),
  );
  writeFileSync(
    join(dir, "log.sh"),
    'printf "%s %s %s %s %s\\n" "$1" "$2" "$CE_JOB_OWNER" "$CE_JOB_VO" "$(id -un)" >> "$0.log"\n'.replace("$0.log", `${dir}/finished.log`),
  );
  for (const f of ["admit.sh", "log.sh"]) chmodSync(join(dir, f), 0o755);
  env = await testEnv({
    jobs: {
      hooks: {
        account: "nobody",
        // One owner (every job here) holds at most concurrency - 1 hook slots.
        concurrency: 3,
        timeoutSeconds: 2,
        scripts: [
          { state: "ACCEPTED", command: ["/bin/bash", join(dir, "admit.sh")] },
          { state: "FINISHED", command: ["/bin/bash", join(dir, "log.sh")] },
        ],
      },
    },
  });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("state hooks", () => {
  it("an ACCEPTED hook refuses a job: FAILED with the hook's reason, never prepared, not restartable", async () => {
    const id = await submitTestJob(env, {}, { fqans: ["/banned/Role=production"] });
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("Job refused by the site at ACCEPTED: VO banned has used its CPU quota for this month");
    expect(r?.failedCause).toBe("user");
    expect(r?.failedState).toBeUndefined();
    expect((await transitionsOf(env, id)).map((t) => t.to)).not.toContain("PREPARING");
    expect(await env.control.read(id, "failed")).toContain("VO banned has used its CPU quota");
  });

  it("passes other jobs; a FINISHED hook gets id, state, owner and VO as the hook account", async () => {
    const id = await submitTestJob(env, {}, { fqans: ["/atlas"] });
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
    const line = await waitFor("hook log", async () =>
      readFileSync(join(dir, "finished.log"), { encoding: "utf8", flag: "a+" })
        .split("\n")
        .find((l) => l.startsWith(id)),
    );
    expect(line).toBe(`${id} FINISHED /DC=org/DC=test/CN=Test User atlas ${asRoot ? "nobody" : (process.env.USER ?? "")}`.trimEnd());
  });

  it("a hook that hangs is ended at its timeout and the job goes on; other jobs are not held up meanwhile", async () => {
    const t0 = Date.now();
    const slow = await submitTestJob(env, {}, { fqans: ["/slow"] });
    await waitFor("the slow hook running", async () => existsSync(join(dir, "slow-started")), 10_000);
    const quick = await submitTestJob(env, {}, { fqans: ["/atlas"] });
    expect((await waitForRest(env, quick, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
    const slowNow = await env.jobs.get(slow);
    expect(slowNow?.state).toBe("ACCEPTED");
    expect((await waitForRest(env, slow, ["FINISHED", "FAILED"]))?.rest).toBe("FINISHED");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_000);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});
