/**
 * The control directory private to the head node (issue 35, docs/operations.md "What the worker
 * nodes share"): with the control dir 0700 root, a batch job on Slurm and on Grid Engine, run as
 * a mapped account that can neither list nor traverse the control dir, finishes with its uploaded
 * inputs used and its outputs returned, and what its wrapper wrote in its batch dir beside the
 * session (`<session>.lrms`: diag with the usage figures, the exit code) reaches the job's
 * diagnose files, its info document and its accounting record. A job that ends with `exit 3` is
 * FAILED with exit code 3. Real batch systems (@ce/testing/slurm, gridengine), a whole CE
 * (@ce/testing/stack), real accounts (root only).
 */
import { chmodSync, chownSync, statSync } from "node:fs";
import { join } from "node:path";
import { TestAccounts } from "@ce/mapping/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AccountingDb } from "../../packages/accounting/src/index.js";
import { HAS_GRIDENGINE, startGridEngine, type GridEngineCluster } from "@ce/testing/gridengine";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { stackClient } from "@ce/testing/stack-client";
import { waitFor } from "@ce/testing";

const ROOT = TestAccounts.available();
if (!ROOT) console.warn("tests/layouts/private-control.test.ts skipped: creating local accounts (useradd) needs root");

/** Uses its input, burns a little CPU and ~30 MB, and probes the control dir it must not reach. */
const RUN_SH = `#!/bin/bash
tr a-z A-Z < in.txt > out.txt
i=0; while (( i < 200000 )); do i=$((i + 1)); done
big=$(head -c 30000000 /dev/zero | tr '\\0' x); echo "\${#big}" > size.txt
for p in "$1" "$1/jobs"; do if ls -- "$p" >/dev/null 2>&1; then echo "ls $p: OK"; else echo "ls $p: DENIED"; fi; done > probe.txt
[[ -r $1/jobs/\${GRID_GLOBAL_JOBID:0:2}/\${GRID_GLOBAL_JOBID:2:2}/$GRID_GLOBAL_JOBID/local ]] && echo "local: READABLE" >> probe.txt
true
`;

function suite(backend: "slurm" | "sge", start: () => Promise<{ env: NodeJS.ProcessEnv; stop(): void }>) {
  const accounts = new TestAccounts();
  let stack: Stack;
  let cluster: { env: NodeJS.ProcessEnv; stop(): void } | undefined;
  let acct: string;
  let c: ReturnType<typeof stackClient>;

  beforeAll(async () => {
    acct = await accounts.add(backend === "slurm" ? "ps" : "pg");
    cluster = await start();
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend,
      env: cluster.env,
      config: {
        mapping: { rules: [{ match: "*", user: acct }] },
        ...(backend === "sge" ? { jobs: { queues: [{ name: "main" }] } } : {}),
      },
    });
    // The site's layout: the control dir root's own and closed (what ensureRoots makes it, and
    // what a site that made the directory itself may have chosen).
    const control = join(stack.state, "control");
    chownSync(control, 0, 0);
    chmodSync(control, 0o700);
    const a = stack.arcEnv;
    c = stackClient(stack, { cert: a.X509_USER_CERT!, key: a.X509_USER_KEY! });
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    cluster?.stop();
    await accounts.remove();
  }, 120_000);

  const put = (id: string, name: string, body: string) =>
    c.curl(["-X", "PUT", "--data-binary", "@-", `${c.api}/jobs/${id}/session/${name}`], body);
  const get = (id: string, path: string) => c.curl(["-H", "Accept: */*", `${c.api}/jobs/${id}/${path}`]);

  it("the control dir is 0700 root and the job's account reaches none of it; the job finishes with its outputs and usage", async () => {
    const control = statSync(join(stack.state, "control"));
    expect({ uid: control.uid, mode: control.mode & 0o7777 }).toEqual({ uid: 0, mode: 0o700 });
    const queue = backend === "sge" ? `(queue="main")` : "";
    const sub = c.submit(
      `&(executable="run.sh")(arguments="${join(stack.state, "control")}")(jobname="private-${backend}")${queue}
       (inputfiles=("run.sh" "")("in.txt" ""))(outputfiles=("out.txt" "")("probe.txt" "")("size.txt" ""))(stdout="stdout.txt")`,
    );
    expect(sub.id, sub.body).toBeDefined();
    const id = sub.id!;
    expect(put(id, "run.sh", RUN_SH).status).toBe(200);
    expect(put(id, "in.txt", "hello input\n").status).toBe(200);
    expect(await c.waitState(id, ["FINISHED", "FAILED", "KILLED"], 180_000)).toBe("FINISHED");

    expect(get(id, "session/out.txt")).toEqual({ status: 200, body: "HELLO INPUT\n" });
    expect(get(id, "session/size.txt").body.trim()).toBe("30000000");
    const probe = get(id, "session/probe.txt").body;
    expect(probe).toMatch(/^ls \S+\/control: DENIED$/m);
    expect(probe).toMatch(/^ls \S+\/control\/jobs: DENIED$/m);
    expect(probe).not.toMatch(/READABLE/);

    // The wrapper's diag, written in the batch dir on the node, reached the job's control files.
    const diag = get(id, "diagnose/diag");
    expect(diag.status).toBe(200);
    expect(diag.body).toMatch(/^exitcode=0$/m);
    expect(diag.body).toMatch(/^nodename=\S+$/m);
    expect(diag.body).toMatch(/^LRMSEndTime=\d{14}Z$/m);
    const rss = Number(/^MaxResidentMemory=(\d+)kB$/m.exec(diag.body)?.[1]);
    expect(rss).toBeGreaterThan(30_000);
    expect(diag.body).toMatch(/^UserTime=[\d.]+s$/m);

    // The info document carries the usage (GLUE2 ComputingActivity).
    const info = c.curl(
      [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json",
        "--data-binary",
        "@-",
        `${c.api}/jobs?action=info`,
      ],
      JSON.stringify({ job: [{ id }] }),
    );
    expect(info.status).toBe(201);
    const act = (JSON.parse(info.body) as { job: Array<{ info_document: { ComputingActivity: Record<string, unknown> } }> }).job[0]!
      .info_document.ComputingActivity;
    expect(Number(act.UsedMainMemory)).toBeGreaterThan(0);
    expect(act.UsedTotalCPUTime).toBeDefined();
    expect(act.UsedTotalWallTime).toBeDefined();
    expect(act.StartTime).toBeDefined();
    expect(act.EndTime).toBeDefined();
    expect(act.ExitCode).toBe("0");

    // And so does the accounting record.
    const db = await AccountingDb.open(undefined, stack.state);
    try {
      const rec = await waitFor("the usage record", async () => (await db.endedBetween(0, 2 ** 31)).find((r) => r.jobId === id), 30_000);
      expect(rec.maxRssKb).toBeGreaterThan(0);
      expect(rec.startTime).toBeGreaterThan(0);
      expect(rec.endTime).toBeGreaterThanOrEqual(rec.startTime!);
      expect(rec.exitCode).toBe(0);
      expect(rec.cpuSeconds).toBeGreaterThanOrEqual(0);
      expect(rec.account).toBe(acct);
    } finally {
      await db.close();
    }
  }, 300_000);

  it("a job that ends with exit 3 is FAILED with exit code 3", async () => {
    const queue = backend === "sge" ? `(queue="main")` : "";
    const sub = c.submit(`&(executable="/bin/sh")(arguments="-c" "exit 3")(jobname="exit3-${backend}")${queue}`);
    expect(sub.id, sub.body).toBeDefined();
    expect(await c.waitState(sub.id!, ["FINISHED", "FAILED", "KILLED"], 180_000)).toBe("FAILED");
    const info = c.curl(
      [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json",
        "--data-binary",
        "@-",
        `${c.api}/jobs?action=info`,
      ],
      JSON.stringify({ job: [{ id: sub.id }] }),
    );
    const act = (JSON.parse(info.body) as { job: Array<{ info_document: { ComputingActivity: Record<string, unknown> } }> }).job[0]!
      .info_document.ComputingActivity;
    expect(act.ExitCode).toBe("3");
    expect(get(sub.id!, "diagnose/diag").body).toMatch(/^exitcode=3$/m);
  }, 240_000);
}

describe.skipIf(!ROOT || !HAS_SLURM)("control dir private to the head node: Slurm", () => {
  let slurm: SlurmCluster;
  suite("slurm", async () => {
    slurm = await startSlurm(`/tmp/ce-slurm-p${process.pid}`);
    return { env: { SLURM_CONF: slurm.conf }, stop: () => slurm.stop() };
  });
});

describe.skipIf(!ROOT || !HAS_GRIDENGINE)("control dir private to the head node: Grid Engine", () => {
  let sge: GridEngineCluster;
  suite("sge", async () => {
    sge = await startGridEngine(`/tmp/ce-sge-p${process.pid}`, { queues: ["main"], slots: 4 });
    return { env: sge.env, stop: () => sge.stop() };
  });
});
