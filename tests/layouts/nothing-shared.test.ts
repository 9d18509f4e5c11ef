/**
 * Nothing shared (issue 35, `lrms.sharedSession: false`, docs/operations.md "What the worker nodes
 * share"): the session root and the control dir are 0700 root, so the job's account can read
 * neither; the batch script carries the CE's URL, the CA and the job's capability, and the wrapper
 * fetches the inputs into `lrms.scratchDir` over HTTPS (curl) and sends the outputs, diag and exit
 * code back through the gateway's node route. A job with uploaded inputs finishes with its
 * outputs; `exit 3` is FAILED with exit code 3; the diag carries the bytes moved; every token-like
 * string the job can see opens nothing of another job; a job the batch system kills for its wall
 * time is reported as such. Real fork, Slurm and Grid Engine back ends, a whole CE, a real account
 * (root only).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { TestAccounts } from "@ce/mapping/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_GRIDENGINE, startGridEngine, type GridEngineCluster } from "@ce/testing/gridengine";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { stackClient } from "@ce/testing/stack-client";

const ROOT = TestAccounts.available();
if (!ROOT) console.warn("tests/layouts/nothing-shared.test.ts skipped: creating local accounts (useradd) needs root");

/**
 * Uses its input, probes the session root and control dir, and collects every token-like string it
 * can see (its environment, its own script and files) into tokens.txt, one per line.
 */
const RUN_SH = `#!/bin/bash
tr a-z A-Z < in.txt > out.txt
mkdir -p res && echo nested > res/n.txt
for p in "$1" "$2"; do if ls -- "$p" >/dev/null 2>&1; then echo "ls $p: OK"; else echo "ls $p: DENIED"; fi; done > probe.txt
{ env; cat -- "$0" 2>/dev/null; for f in ../batch/* ../../*/batch/*; do cat -- "$f" 2>/dev/null; done; } |
  grep -aoE '[A-Za-z0-9_-]{8,}_[A-Za-z0-9_-]{20,}|[A-Za-z0-9_-]{40,}' | sort -u > tokens.txt
pwd > where.txt
`;

interface Opts {
  /** xRSL that makes the batch system kill the job for its wall time; none: not tested here. */
  walltime?: string;
  config?: Record<string, unknown>;
}

function suite(backend: "fork" | "slurm" | "sge", start: () => Promise<{ env: NodeJS.ProcessEnv; stop(): void }>, o: Opts = {}) {
  const accounts = new TestAccounts();
  let stack: Stack;
  let cluster: { env: NodeJS.ProcessEnv; stop(): void } | undefined;
  let acct: string;
  let c: ReturnType<typeof stackClient>;
  let scratch: string;

  beforeAll(async () => {
    acct = await accounts.add({ fork: "nf", slurm: "ns", sge: "ng" }[backend]);
    cluster = await start();
    scratch = `/tmp/ce-nofs-${backend}-${process.pid}`;
    mkdirSync(scratch, { recursive: true });
    chmodSync(scratch, 0o1777);
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend,
      env: cluster.env,
      // The node trusts the CE's endpoint with the stack's CA; batch dirs live on the head node,
      // apart from the session root (paths relative to the state dir).
      config: {
        mapping: { rules: [{ match: "*", user: acct }] },
        lrms: { sharedSession: false, scratchDir: scratch, nodeCaFile: "pki/ca/ca.pem" },
        paths: { batchRoot: "batch" },
        ...o.config,
      },
    });
    for (const d of ["control", "session"]) {
      chownSync(join(stack.state, d), 0, 0);
      chmodSync(join(stack.state, d), 0o700);
    }
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
  /** curl trusting the CE, with no client certificate: what a node (or a thief of its tokens) has. */
  const bare = (args: string[]) => {
    const r = spawnSync("curl", ["-s", "-w", "\n%{http_code}", "--cacert", join(stack.pki, "ca", "ca.pem"), ...args], { encoding: "utf8" });
    const i = r.stdout.lastIndexOf("\n");
    return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) };
  };

  it("a job with uploaded inputs finishes with its outputs; its account reads neither the session root nor the control dir", async () => {
    for (const d of ["control", "session"]) {
      const st = statSync(join(stack.state, d));
      expect({ d, uid: st.uid, mode: st.mode & 0o7777 }).toEqual({ d, uid: 0, mode: 0o700 });
    }
    const sub = c.submit(
      `&(executable="run.sh")(arguments="${join(stack.state, "session")}" "${join(stack.state, "control")}")(jobname="nofs-${backend}")
       (inputfiles=("run.sh" "")("in.txt" ""))(outputfiles=("out.txt" "")("probe.txt" "")("tokens.txt" "")("where.txt" "")("res/" ""))(stdout="stdout.txt")`,
    );
    expect(sub.id, sub.body).toBeDefined();
    const id = sub.id!;
    expect(put(id, "run.sh", RUN_SH).status).toBe(200);
    expect(put(id, "in.txt", "hello input\n").status).toBe(200);
    expect(await c.waitState(id, ["FINISHED", "FAILED", "KILLED"], 180_000)).toBe("FINISHED");

    expect(get(id, "session/out.txt")).toEqual({ status: 200, body: "HELLO INPUT\n" });
    expect(get(id, "session/res/n.txt")).toEqual({ status: 200, body: "nested\n" });
    expect(get(id, "session/where.txt").body.startsWith(`${scratch}/ce-${id}.`)).toBe(true);
    const probe = get(id, "session/probe.txt").body;
    expect(probe).toMatch(/^ls \S+\/session: DENIED$/m);
    expect(probe).toMatch(/^ls \S+\/control: DENIED$/m);
    const diag = get(id, "diagnose/diag").body;
    expect(diag).toMatch(/^exitcode=0$/m);
    expect(Number(/^NodeInputBytes=(\d+)$/m.exec(diag)?.[1])).toBe(RUN_SH.length + "hello input\n".length);
    expect(Number(/^NodeOutputBytes=(\d+)$/m.exec(diag)?.[1])).toBeGreaterThan(0);
    expect(diag).toMatch(/^NodeInputMs=\d+$/m);

    // Every token-like string the job saw opens nothing of another job (nor its own any more).
    const other = c.submit(`&(executable="/bin/sh")(arguments="-c" "sleep 60")(jobname="nofs-other")`);
    expect(other.id, other.body).toBeDefined();
    await c.waitState(other.id!, ["RUNNING"], 120_000);
    const tokens = get(id, "session/tokens.txt").body.split("\n").filter(Boolean);
    expect(tokens.some((t) => t.startsWith("cenode1_"))).toBe(true); // its own capability was there to see
    for (const t of tokens) {
      for (const [job, path] of [
        [other.id!, "files"],
        [id, "files"],
      ] as const) {
        const r = bare(["-H", `Authorization: Bearer ${t}`, `${stack.url}/node/1/jobs/${job}/${path}`]);
        expect(r.status, `${t.slice(0, 12)}… on ${job}`).toBeGreaterThanOrEqual(400);
      }
      const list = bare(["-H", `Authorization: Bearer ${t}`, "-H", "Accept: application/json", `${stack.url}/rest/1.1/jobs`]);
      expect(list.status, `${t.slice(0, 12)}… on the job list`).toBeGreaterThanOrEqual(400);
      expect(list.body).not.toContain(other.id!);
    }
    c.action("kill", other.id!);
  }, 300_000);

  it("a job that ends with exit 3 is FAILED with exit code 3", async () => {
    const sub = c.submit(`&(executable="/bin/sh")(arguments="-c" "exit 3")(jobname="nofs-exit3")`);
    expect(sub.id, sub.body).toBeDefined();
    expect(await c.waitState(sub.id!, ["FINISHED", "FAILED", "KILLED"], 180_000)).toBe("FAILED");
    expect(get(sub.id!, "diagnose/diag").body).toMatch(/^exitcode=3$/m);
  }, 240_000);
  it.skipIf(!o.walltime)(
    "a job the batch system kills for its wall time is reported as such",
    async () => {
      const sub = c.submit(`&(executable="/bin/sleep")(arguments="300")(jobname="nofs-wall")${o.walltime ?? ""}`);
      expect(sub.id, sub.body).toBeDefined();
      expect(await c.waitState(sub.id!, ["FINISHED", "FAILED", "KILLED"], 240_000)).toBe("FAILED");
      expect(get(sub.id!, "diagnose/failed").body).toMatch(/Walltime exceeded/);
    },
    300_000,
  );
}

describe.skipIf(!ROOT)("nothing shared: fork", () => {
  suite("fork", async () => ({ env: {}, stop: () => undefined }));
});

describe.skipIf(!ROOT || !HAS_SLURM)("nothing shared: Slurm", () => {
  let slurm: SlurmCluster;
  suite(
    "slurm",
    async () => {
      slurm = await startSlurm(`/tmp/ce-slurm-n${process.pid}`);
      return { env: { SLURM_CONF: slurm.conf }, stop: () => slurm.stop() };
    },
    { walltime: `(walltime="1")` },
  );
});

describe.skipIf(!ROOT || !HAS_GRIDENGINE)("nothing shared: Grid Engine", () => {
  let sge: GridEngineCluster;
  suite(
    "sge",
    async () => {
      sge = await startGridEngine(`/tmp/ce-sge-n${process.pid}`, { queues: ["main", "short"], slots: 4 });
      return { env: sge.env, stop: () => sge.stop() };
    },
    // A job in "short" gets a 4 s h_rt: Grid Engine's kill comes within seconds.
    { walltime: `(queue="short")`, config: { jobs: { queues: [{ name: "main" }, { name: "short", defaultWallTimeSeconds: 4 }] } } },
  );
});
