/**
 * Job isolation with real accounts (docs/security.md "Privilege separation"): a full stack (JEM +
 * gateway processes) with a mapping of a pool of two accounts and one fixed account, created with
 * useradd (root only; CI runs as root). Real jobs on fork and on Slurm prove: `id -u` is the mapped
 * account; two identities of the pool get two accounts; a job reads nothing of the CE's (TLS key,
 * delegation key, admin token, Redis passwords, control dir) or of another account (session dir,
 * proxy); Redis answers NOAUTH; the gateway still serves the job's files; other local users
 * cannot read session dirs. Plus an ARC client round trip (arcsub/arcget) with mapping on.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TestAccounts } from "@ce/mapping/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { issueStackUser, stackClient, type StackUser } from "@ce/testing/stack-client";

const ROOT = TestAccounts.available();
if (!ROOT) console.warn("tests/security/isolation.test.ts skipped: creating local accounts (useradd) and switching to them needs root");

const jobDirOf = (state: string, id: string) => join(state, "control", "jobs", id.slice(0, 2), id.slice(2, 4), id);
const uidOf = (name: string) => Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());

const issue = issueStackUser;

/** The stack's REST interface as one user; a refused submission fails the test with the reply. */
function client(stack: Stack, cred: StackUser) {
  const c = stackClient(stack, cred);
  return {
    ...c,
    submit(xrsl: string): string {
      const r = c.submit(xrsl);
      if (!r.id) throw new Error(`submission refused: ${r.body}`);
      return r.id;
    },
    get: (id: string, path: string) => c.curl(["-H", "Accept: */*", `${c.api}/jobs/${id}/session/${path}`]),
  };
}

/** The probe a job of one account runs against everything it must not reach. */
function probeScript(stack: Stack, other: { id: string }, redisPort: string): string {
  const s = stack.state;
  const otherJob = jobDirOf(s, other.id);
  return `#!/bin/bash
id -u > id.txt
p() { if cat -- "$2" >/dev/null 2>&1; then echo "cat:$1:OK"; else echo "cat:$1:DENIED"; fi; }
l() { if ls -- "$2" >/dev/null 2>&1; then echo "ls:$1:OK"; else echo "ls:$1:DENIED"; fi; }
w() { if (echo x > "$2") 2>/dev/null; then echo "write:$1:OK"; else echo "write:$1:DENIED"; fi; }
own=${JSON.stringify(join(s, "control", "jobs"))}/\${GRID_GLOBAL_JOBID:0:2}/\${GRID_GLOBAL_JOBID:2:2}/$GRID_GLOBAL_JOBID
p other-session-file ${s}/session/${other.id}/mine.txt
l other-session ${s}/session/${other.id}
w other-session ${s}/session/${other.id}/planted
p other-proxy ${s}/session/${other.id}.lrms/proxy
l other-batch ${s}/session/${other.id}.lrms
p other-local ${otherJob}/local
p tls-key ${s}/pki/host/key.pem
p ca-key ${s}/pki/ca-private/ca.key
p delegation-key ${s}/secrets/delegation.key
p admin-token ${s}/secrets/admin.token
p redis-gateway-password ${s}/secrets/redis-gateway.password
p redis-jem-password ${s}/secrets/redis-jem.password
l secrets ${s}/secrets
l control ${s}/control
l control-jobs ${s}/control/jobs
l session-root ${s}/session
l events ${s}/session/.events
l own-jobdir "$own"
p own-local "$own/local"
p own-description "$own/description"
w own-status "$own/status"
l own-batch ${s}/session/$GRID_GLOBAL_JOBID.lrms
echo "redis:$(redis-cli -h 127.0.0.1 -p ${redisPort} get x 2>&1 | head -1)"
echo "job wrote this" > result.txt
mkdir -p sub && echo nested > sub/n.txt
`;
}

const probes = (out: string) =>
  Object.fromEntries(
    out
      .split("\n")
      .filter((l) => /^(cat|ls|write):/.test(l))
      .map((l) => [l.slice(0, l.lastIndexOf(":")), l.slice(l.lastIndexOf(":") + 1)]),
  );

describe.skipIf(!ROOT)("jobs run as mapped accounts and reach nothing of the CE's or of others (fork)", () => {
  const accounts = new TestAccounts();
  let stack: Stack;
  let pool: string[];
  let fixed: string;
  let other: string;
  let ids: { s: string; p: string; f: string };
  let second: StackUser;
  let third: StackUser;

  beforeAll(async () => {
    pool = [await accounts.add("pa"), await accounts.add("pb")];
    fixed = await accounts.add("fx");
    other = await accounts.add("ot");
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "fork",
      config: {
        mapping: {
          rules: [
            { name: "fixed", match: "dn:*CN=Fixed*", user: fixed },
            { name: "pool", match: "*", pool: { accounts: pool } },
          ],
        },
      },
    });
    second = issue(stack, "Second User");
    third = issue(stack, "Fixed User");
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await accounts.remove();
  }, 60_000);

  it("id -u is the mapped account; two pool identities get two accounts; a fixed rule its own; the ARC client round trip works", async () => {
    const env = { ...stack.arcEnv, X509_USER_PROXY: join(stack.state, "home", "proxy.pem") };
    const a = stack.arcEnv;
    execFileSync(
      "arcproxy",
      [
        "-C",
        a.X509_USER_CERT!,
        "-K",
        a.X509_USER_KEY!,
        "-P",
        env.X509_USER_PROXY,
        "-T",
        a.X509_CERT_DIR!,
        "-S",
        "",
        "-c",
        "validityPeriod=2H",
      ],
      { env, stdio: "ignore" },
    );
    const work = join(stack.state, "work");
    mkdirSync(work, { recursive: true });
    writeFileSync(
      join(work, "s.xrsl"),
      `&(executable="/bin/sh")(arguments="-c" "id -u > id.txt; echo mine > mine.txt; sleep 20")(outputfiles=("id.txt" "")("mine.txt" ""))(jobname="iso-s")`,
    );
    const sub = spawnSync("arcsub", ["-C", stack.url, "-T", "arcrest", "-j", join(work, "jobs.dat"), join(work, "s.xrsl")], {
      env,
      encoding: "utf8",
      cwd: work,
    });
    const m = /jobid: (\S+)/.exec(sub.stdout);
    expect(m, `${sub.stdout}${sub.stderr}`).toBeTruthy();
    const jobUrl = m![1]!;
    const s = jobUrl.slice(jobUrl.lastIndexOf("/") + 1);
    const c1 = client(stack, { cert: a.X509_USER_CERT!, key: a.X509_USER_KEY! });
    await c1.waitState(s, ["RUNNING"]);

    // S's proxy: the account's own file, 0600, in its batch dir beside the session.
    const proxy = statSync(join(stack.state, "session", `${s}.lrms`, "proxy"));
    expect(proxy.uid).toBe(uidOf(pool[0]!));
    expect(proxy.mode & 0o777).toBe(0o600);

    const c2 = client(stack, second);
    const p = c2.submit(
      `&(executable="probe.sh")(inputfiles=("probe.sh" ""))(stdout="out.txt")(stderr="err.txt")(outputfiles=("out.txt" "")("err.txt" "")("id.txt" "")("result.txt" "")("sub/n.txt" ""))`,
    );
    const put = c2.curl(
      ["-X", "PUT", "--data-binary", "@-", `${c2.api}/jobs/${p}/session/probe.sh`],
      probeScript(stack, { id: s }, new URL(inject("redisUrl")).port),
    );
    expect(put.status).toBe(200);
    const c3 = client(stack, third);
    const f = c3.submit(`&(executable="/bin/sh")(arguments="-c" "id -u > id.txt")(outputfiles=("id.txt" ""))`);
    ids = { s, p, f };

    expect(await c2.waitState(p, ["FINISHED", "FAILED"])).toBe("FINISHED");
    expect(await c3.waitState(f, ["FINISHED", "FAILED"])).toBe("FINISHED");
    expect(await c1.waitState(s, ["FINISHED", "FAILED"])).toBe("FINISHED");

    const uidS = Number(c1.get(s, "id.txt").body.trim());
    const uidP = Number(c2.get(p, "id.txt").body.trim());
    expect(uidS).toBe(uidOf(pool[0]!));
    expect(uidP).toBe(uidOf(pool[1]!));
    expect(uidS).not.toBe(uidP);
    expect(Number(c3.get(f, "id.txt").body.trim())).toBe(uidOf(fixed));
    for (const u of [uidS, uidP]) expect(u).toBeGreaterThanOrEqual(1000);

    // The ARC client gets S's outputs back (arcget: PROPFIND + downloads) with mapping on.
    const got = spawnSync("arcget", ["-j", join(work, "jobs.dat"), "-D", work, jobUrl], { env, encoding: "utf8", cwd: work });
    expect(got.status, `${got.stdout}${got.stderr}`).toBe(0);
    expect(readFileSync(join(work, s, "id.txt"), "utf8").trim()).toBe(String(uidS));
    expect(readFileSync(join(work, s, "mine.txt"), "utf8")).toBe("mine\n");
  }, 240_000);

  it("the job reaches nothing of the CE's or of the other account, and Redis refuses it (NOAUTH)", () => {
    const out = client(stack, second).get(ids.p, "out.txt").body;
    const r = probes(out);
    const denied = [
      "cat:other-session-file",
      "ls:other-session",
      "write:other-session",
      "cat:other-proxy",
      "ls:other-batch",
      "cat:other-local",
      "cat:tls-key",
      "cat:ca-key",
      "cat:delegation-key",
      "cat:admin-token",
      "cat:redis-gateway-password",
      "cat:redis-jem-password",
      "ls:secrets",
      "ls:control",
      "ls:control-jobs",
      "ls:session-root",
      "ls:events",
      "ls:own-jobdir",
      "cat:own-local",
      "cat:own-description",
      "write:own-status",
    ];
    for (const k of denied) expect.soft(r[k], `${k} in\n${out}`).toBe("DENIED");
    // Its own batch dir (job.sh, comment, diag), beside its session, is what it reaches; the
    // control dir is the CE's alone (0700).
    expect(r["ls:own-batch"]).toBe("OK");
    expect(statSync(join(stack.state, "control")).mode & 0o777).toBe(0o700);
    expect(out).toMatch(/^redis:NOAUTH/m);
    expect(existsPlanted(stack, ids.s)).toBe(false);
  });

  it("the gateway serves upload, download, listing, PROPFIND and delete of the job's files, as the job wrote them", () => {
    const c = client(stack, second);
    const id = ids.p;
    const session = join(stack.state, "session", id);
    const st = statSync(session);
    expect(st.uid).toBe(uidOf(pool[1]!));
    expect(st.mode & 0o7777).toBe(0o2770);
    const result = statSync(join(session, "result.txt"));
    expect(result.uid).toBe(uidOf(pool[1]!));
    expect(result.mode & 0o777).toBe(0o660); // umask 007: the CE's group reads and writes, others nothing

    expect(c.get(id, "result.txt")).toEqual({ status: 200, body: "job wrote this\n" });
    expect(c.get(id, "sub/n.txt")).toEqual({ status: 200, body: "nested\n" });
    const list = c.curl(["-H", "Accept: application/json", `${c.api}/jobs/${id}/session/`]);
    expect(list.status).toBe(200);
    const doc = JSON.parse(list.body) as { file: unknown[]; dir: unknown[] };
    expect(JSON.stringify(doc.file)).toContain("result.txt");
    expect(JSON.stringify(doc.dir)).toContain("sub");
    const dav = c.curl(["-X", "PROPFIND", "-H", "Depth: 1", `${c.api}/jobs/${id}/session/`]);
    expect(dav.status).toBe(207);
    expect(dav.body).toContain("result.txt");
    const up = c.curl(["-X", "PUT", "--data-binary", "@-", `${c.api}/jobs/${id}/session/sub/uploaded.txt`], "after the job\n");
    expect(up.status).toBe(200);
    expect(c.get(id, "sub/uploaded.txt")).toEqual({ status: 200, body: "after the job\n" });
    expect(c.curl(["-X", "DELETE", `${c.api}/jobs/${id}/session/sub/n.txt`]).status).toBe(202);
    expect(c.get(id, "sub/n.txt").status).toBe(404);
    expect(c.curl(["-X", "DELETE", `${c.api}/jobs/${id}/session/result.txt`]).status).toBe(202);
    expect(c.get(id, "result.txt").status).toBe(404);
  });

  it("a kill cancels the fork job as its account: the job's processes end", async () => {
    const c = client(stack, second);
    const id = c.submit(`&(executable="/bin/sh")(arguments="-c" "sleep 300")(jobname="iso-kill")`);
    await c.waitState(id, ["RUNNING"]);
    const running = () => spawnSync("pgrep", ["-u", pool[1]!, "-f", "sleep 300"], { encoding: "utf8" }).stdout.trim();
    expect(running()).not.toBe("");
    const r = c.curl(
      [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json",
        "--data-binary",
        "@-",
        `${c.api}/jobs?action=kill`,
      ],
      JSON.stringify({ job: [{ id }] }),
    );
    expect(r.status).toBe(201);
    expect(await c.waitState(id, ["KILLED", "FAILED", "FINISHED"])).toBe("KILLED");
    expect(running()).toBe("");
  }, 120_000);

  it("session dirs are not readable by another local user", () => {
    for (const id of [ids.p, ids.f]) {
      // S was fetched (and cleaned) by arcget
      const r = spawnSync("runuser", ["-u", other, "--", "ls", join(stack.state, "session", id)], { encoding: "utf8" });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/Permission denied/);
    }
    // Nor by the other mapped account.
    const r = spawnSync("runuser", ["-u", pool[0]!, "--", "ls", join(stack.state, "session", ids.p)], { encoding: "utf8" });
    expect(r.stderr).toMatch(/Permission denied/);
  });
});

function existsPlanted(stack: Stack, id: string): boolean {
  try {
    statSync(join(stack.state, "session", id, "planted"));
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!ROOT || !HAS_SLURM)("Slurm jobs run as the mapped account", () => {
  const accounts = new TestAccounts();
  let stack: Stack;
  let slurm: SlurmCluster;
  let acct: string;

  beforeAll(async () => {
    acct = await accounts.add("sl");
    slurm = await startSlurm(`/tmp/ce-slurm-i${process.pid}`);
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "slurm",
      env: { SLURM_CONF: slurm.conf },
      config: { mapping: { rules: [{ match: "*", user: acct }] } },
    });
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    slurm?.stop();
    await accounts.remove();
  }, 120_000);

  it("id -u in the batch job is the mapped account, and Slurm records that user", async () => {
    const a = stack.arcEnv;
    const c = client(stack, { cert: a.X509_USER_CERT!, key: a.X509_USER_KEY! });
    const id = c.submit(
      `&(executable="/bin/sh")(arguments="-c" "id -u > id.txt; cat ${stack.state}/secrets/admin.token > leak.txt 2>&1; true")(jobname="isoslurm")(outputfiles=("id.txt" "")("leak.txt" ""))`,
    );
    await c.waitState(id, ["RUNNING", "FINISHED", "FAILED"], 120_000);
    const user = execFileSync("squeue", ["-h", "-t", "all", "-n", "isoslurm", "-o", "%u"], {
      env: { ...process.env, SLURM_CONF: slurm.conf },
      encoding: "utf8",
    }).trim();
    expect(user.split("\n")[0]).toBe(acct);
    expect(await c.waitState(id, ["FINISHED", "FAILED"], 120_000)).toBe("FINISHED");
    expect(Number(c.get(id, "id.txt").body.trim())).toBe(uidOf(acct));
    expect(c.get(id, "leak.txt").body).toMatch(/Permission denied/);
  }, 300_000);
});
