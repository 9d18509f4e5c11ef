/**
 * Issue 34's acceptance run on a whole CE (gateway + JEM processes) with mapping on, per batch
 * system: fork, a real Slurm and a real Grid Engine cell (@ce/testing fixtures).
 *
 * - A token-only client (bearer token from a test OIDC issuer, a JWT delegation) submits a job
 *   asking for the shipped ENV/TOKEN; the job finds BEARER_TOKEN_FILE in its session, holding
 *   exactly the delegated token, mode 0600, owned by its account, and reads it every second.
 *   Renewing the delegation reaches the running job within 30 s; the file is gone afterwards.
 * - The same for an X.509 delegation: renewing it (CSR, signed chain) replaces the batch job's
 *   proxy (X509_USER_PROXY) and ENV/PROXY's `user.proxy` while the job runs.
 * - Refused at submission (fork only; the gateway decides): a token-only job asking for ENV/PROXY,
 *   ENV/TOKEN without a token; `action=get` gives the owner its token as application/jwt and a
 *   compute.read-only token of the same subject a 403.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { enableRte, setRteParams } from "@ce/store";
import { signCsrAsProxy } from "@ce/x509/testing";
import { TestAccounts } from "@ce/mapping/testing";
import { startStack, type Stack } from "@ce/testing/stack";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { HAS_GRIDENGINE, startGridEngine, type GridEngineCluster } from "@ce/testing/gridengine";
import { waitFor } from "@ce/testing";

const ROOT = process.getuid?.() === 0;
const HAS_ARC_PROXY_RTE = existsSync("/usr/share/arc/rte/ENV/PROXY");
if (!ROOT) console.warn("token-jobs.test.ts SKIPPED: needs root (jobs run as a mapped account)");

interface Http {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One REST 1.1 call as a token caller (`token`) or an X.509 caller (`proxy`: the PEM file). */
function call(
  stack: Stack,
  as: { token: string } | { proxy: string },
  method: string,
  path: string,
  o: { body?: string; headers?: Record<string, string> } = {},
): Promise<Http> {
  const pem = "proxy" in as ? readFileSync(as.proxy, "utf8") : undefined;
  const headers: Record<string, string> = { ...("token" in as ? { authorization: `Bearer ${as.token}` } : {}), ...o.headers };
  return new Promise((resolve, reject) => {
    const req = request(
      `${stack.url}/rest/1.1/${path}`,
      { method, ca: readFileSync(join(stack.pki, "ca", "ca.pem")), agent: false, headers, ...(pem ? { cert: pem, key: pem } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(o.body);
  });
}

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * The job: every second, for up to `seconds`, it reads each file and appends `<label> <sha256>` to
 * seen.txt when the content changed; it stops once it has seen two values of each. First it notes
 * the mode and owner of each file, and where the environment points.
 */
function watcherXrsl(rte: string, files: Array<[label: string, expr: string]>, seconds = 90): string {
  const script = [
    'echo "token=${BEARER_TOKEN_FILE:-} proxy=${X509_USER_PROXY:-}" > env.txt',
    ...files.map(([l, f]) => `stat -c '${l} %a %u' "${f}" >> modes.txt`),
    ...files.map(([l]) => `last_${l}=`),
    `i=0; while [ $i -lt ${seconds} ]; do`,
    ...files.map(
      ([l, f]) =>
        `  h=$(sha256sum < "${f}" | cut -d' ' -f1); if [ "$h" != "$last_${l}" ]; then echo "${l} $h" >> seen.txt; last_${l}=$h; fi`,
    ),
    `  [ "$(wc -l < seen.txt)" -ge ${2 * files.length} ] && break`,
    "  sleep 1; i=$((i+1))",
    "done",
  ].join("\n");
  const q = (s: string) => `"${s.replace(/"/g, '""')}"`;
  return `&(executable="/bin/sh")(arguments="-c" ${q(script)})(jobname="watch")(stdout="out.txt")(stderr="err.txt")(runtimeenvironment=${q(rte)})(outputfiles=("env.txt" "")("modes.txt" "")("seen.txt" "")("err.txt" ""))`;
}

interface Backend {
  name: "fork" | "slurm" | "sge";
  available: boolean;
}
const BACKENDS: Backend[] = [
  { name: "fork", available: true },
  { name: "slurm", available: HAS_SLURM },
  { name: "sge", available: HAS_GRIDENGINE },
];
for (const b of BACKENDS)
  if (!b.available) console.warn(`token-jobs.test.ts: the ${b.name} run is SKIPPED (scripts/ensure-system-deps.sh)`);

describe.each(BACKENDS)("token and proxy jobs end to end on $name", ({ name, available }) => {
  const accounts = new TestAccounts();
  let account = "";
  let uid = -1;
  let slurm: SlurmCluster | undefined;
  let sge: GridEngineCluster | undefined;
  let issuer: TokenIssuer;
  let stack: Stack;
  let token = "";
  let readOnly = "";
  let proxy = "";

  beforeAll(async () => {
    if (!ROOT || !available) return;
    account = await accounts.add(`tk${name.slice(0, 2)}`);
    uid = Number(readFileSync("/etc/passwd", "utf8").match(new RegExp(`^${account}:[^:]*:(\\d+):`, "m"))?.[1]);
    let env: NodeJS.ProcessEnv = {};
    if (name === "slurm") env = { SLURM_CONF: (slurm = await startSlurm(`/tmp/ce-slurm-t${process.pid}`)).conf };
    if (name === "sge") env = (sge = await startGridEngine(`/tmp/ce-sge-t${process.pid}`, { queues: ["main"] })).env;
    issuer = await startTokenIssuer({ audience: "set-per-token" });
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: name,
      env,
      config: {
        auth: { tokens: { issuers: [{ issuer: issuer.issuer, caFile: issuer.caFile }] } },
        mapping: { rules: [{ name: "all", match: "*", user: account }] },
        jobs: { queues: [{ name: "main" }], defaultQueue: "main" },
        lrms: { pollIntervalMs: 300 },
      },
      prepare: (state) => {
        const rte = {
          paths: { controlDir: join(state, "control"), rteDir: join(state, "rte") },
          jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
        };
        enableRte(rte, "ENV/TOKEN"); // found by name among the CE's own RTEs, as ENV/CONTAINER is
        if (HAS_ARC_PROXY_RTE) {
          enableRte(rte, "ENV/PROXY");
          setRteParams(rte, "ENV/PROXY", ["COPY_CACERT_DIR=No"]);
        }
      },
    });
    const aud = new URL(stack.url).origin;
    token = await issuer.mint({ aud, sub: "tok-user", "wlcg.groups": ["/dteam"] });
    readOnly = await issuer.mint({ aud, sub: "tok-user", scope: "compute.read" });
    proxy = stack.arcEnv.X509_USER_PROXY!;
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    await issuer?.close();
    slurm?.stop();
    sge?.stop();
    await accounts.remove();
  }, 60_000);

  const stateOf = async (as: { token: string } | { proxy: string }, id: string) =>
    (
      JSON.parse(
        (await call(stack, as, "POST", "jobs?action=status", { body: JSON.stringify({ job: [{ id }] }), headers: JSON_H })).body,
      ) as {
        job: Array<{ state?: string }>;
      }
    ).job[0]?.state;
  const JSON_H = { "content-type": "application/json", accept: "application/json" };
  const submit = async (as: { token: string } | { proxy: string }, xrsl: string, delegation?: string) => {
    const r = await call(stack, as, "POST", `jobs?action=new${delegation ? `&delegation_id=${delegation}` : ""}`, {
      body: xrsl,
      headers: { "content-type": "application/rsl", accept: "application/json" },
    });
    expect(r.status).toBe(201);
    return (JSON.parse(r.body) as { job: Array<{ id?: string; "status-code": string; reason: string }> }).job[0]!;
  };
  const until = (as: { token: string } | { proxy: string }, id: string, want: string[], ms = 120_000) =>
    waitFor(`job ${id} in ${want.join("/")}`, async () => ((s) => (s && want.includes(s) ? s : undefined))(await stateOf(as, id)), ms, {
      everyMs: 500,
      detail: () => stack.logs().slice(-3000),
    });
  const session = (id: string, file: string) => join(stack.state, "session", id, file);
  const seenLines = (id: string) =>
    existsSync(session(id, "seen.txt")) ? readFileSync(session(id, "seen.txt"), "utf8").trim().split("\n") : [];

  it.skipIf(!ROOT || !available)(
    "a token job finds exactly its delegated token in BEARER_TOKEN_FILE (0600, its account); a renewal reaches it within 30 s",
    async () => {
      const as = { token };
      const first = await issuer.mint({ aud: "https://storage.example.org", sub: "tok-user", scope: "storage.read:/" });
      const renewed = await issuer.mint({ aud: "https://storage.example.org", sub: "tok-user", scope: "storage.read:/ storage.create:/" });
      const d = await call(stack, as, "POST", "delegations?action=new&type=jwt", { headers: { "x-token-delegation": `Bearer ${first}` } });
      expect(d.status).toBe(201);
      const deleg = String(d.headers.location).split("/").pop()!;
      const item = await submit(as, watcherXrsl("ENV/TOKEN", [["t", "$BEARER_TOKEN_FILE"]]), deleg);
      expect(item["status-code"], item.reason).toBe("201");
      const id = item.id!;
      await until(as, id, ["RUNNING"]);
      await waitFor("the job read the first token", async () => (seenLines(id).length >= 1 ? true : undefined), 60_000);
      expect(seenLines(id)).toEqual([`t ${sha(first)}`]);
      const file = session(id, ".bearer_token");
      expect(readFileSync(file, "utf8")).toBe(first);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(statSync(file).uid).toBe(uid);
      // Not served from the session, whoever runs the gateway (here root): only action=get hands it out.
      for (const path of [".bearer_token", "./.bearer_token", "x/../.bearer_token"]) {
        const served = await call(stack, as, "GET", `jobs/${id}/session/${path}`);
        expect(served.status, path).not.toBe(200);
        expect(served.body).not.toContain(first.split(".")[2]!);
      }

      const t0 = Date.now();
      const r = await call(stack, as, "POST", `delegations/${deleg}?action=renew`, {
        headers: { "x-token-delegation": `Bearer ${renewed}` },
      });
      expect(r.status).toBe(200);
      await waitFor("the job read the renewed token", async () => (seenLines(id).length >= 2 ? true : undefined), 30_000, { everyMs: 200 });
      const took = Date.now() - t0;
      expect(took).toBeLessThan(30_000);
      console.log(`${name}: the renewed token reached the running job in ${took} ms`);

      expect(await until(as, id, ["FINISHED", "FAILED"])).toBe("FINISHED");
      expect(seenLines(id)).toEqual([`t ${sha(first)}`, `t ${sha(renewed)}`]);
      expect(readFileSync(session(id, "env.txt"), "utf8")).toBe(`token=${join(stack.state, "session", id, ".bearer_token")} proxy=\n`);
      expect(readFileSync(session(id, "modes.txt"), "utf8")).toBe(`t 600 ${uid}\n`);
      // Gone once the batch job is over: the stage-out cannot deliver it, nothing keeps it.
      expect(existsSync(file)).toBe(false);
    },
    240_000,
  );

  it.skipIf(!ROOT || !available || !HAS_ARC_PROXY_RTE)(
    "an X.509 job with ENV/PROXY: renewing the delegation replaces X509_USER_PROXY and user.proxy while it runs",
    async () => {
      const as = { proxy };
      const n = await call(stack, as, "POST", "delegations?action=new");
      expect(n.status).toBe(201);
      const deleg = String(n.headers.location).split("/").pop()!;
      const sign = async (csr: string) => {
        const pem = readFileSync(proxy, "utf8");
        const certs = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----\n?/g)!;
        const key = pem.match(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----\n?/)![0];
        const put = await call(stack, as, "PUT", `delegations/${deleg}`, {
          body: signCsrAsProxy(csr, certs[0]!, key, certs.slice(1).join("")),
          headers: { "content-type": "application/x-pem-file" },
        });
        expect(put.status, put.body).toBe(200);
      };
      await sign(n.body);
      const item = await submit(
        as,
        watcherXrsl("ENV/PROXY", [
          ["x", "$X509_USER_PROXY"],
          ["u", "user.proxy"],
        ]),
        deleg,
      );
      expect(item["status-code"], item.reason).toBe("201");
      const id = item.id!;
      await until(as, id, ["RUNNING"]);
      await waitFor("the job read both proxy files", async () => (seenLines(id).length >= 2 ? true : undefined), 60_000);
      const t0 = Date.now();
      const renew = await call(stack, as, "POST", `delegations/${deleg}?action=renew`);
      expect(renew.status).toBe(201);
      await sign(renew.body);
      await waitFor("the job read both renewed files", async () => (seenLines(id).length >= 4 ? true : undefined), 30_000, {
        everyMs: 200,
      });
      console.log(`${name}: the renewed proxy reached the running job in ${Date.now() - t0} ms`);
      expect(await until(as, id, ["FINISHED", "FAILED"])).toBe("FINISHED");
      const seen = seenLines(id);
      // Each file changed once: its second value differs from its first, and both files hold the same proxy.
      const x = seen.filter((l) => l.startsWith("x ")),
        u = seen.filter((l) => l.startsWith("u "));
      expect([x.length, u.length]).toEqual([2, 2]);
      expect(x[0]).not.toBe(x[1]);
      expect(x.map((l) => l.slice(2))).toEqual(u.map((l) => l.slice(2)));
      expect(readFileSync(session(id, "modes.txt"), "utf8")).toBe(`x 600 ${uid}\nu 600 ${uid}\n`);
    },
    240_000,
  );

  it.skipIf(!ROOT || !available || name !== "fork")(
    "refused at submission: ENV/PROXY without a proxy, ENV/TOKEN without a token; action=get: the token to its owner only; the job page names issuer, subject and VO",
    async () => {
      const as = { token };
      const delegated = await issuer.mint({ aud: "https://storage.example.org", sub: "tok-user", scope: "storage.read:/" });
      const d = await call(stack, as, "POST", "delegations?action=new&type=jwt", {
        headers: { "x-token-delegation": `Bearer ${delegated}` },
      });
      const deleg = String(d.headers.location).split("/").pop()!;
      if (HAS_ARC_PROXY_RTE) {
        const p = await submit(as, '&(executable="/bin/true")(runtimeenvironment="ENV/PROXY")', deleg);
        expect(p["status-code"]).toBe("400");
        expect(p.reason).toMatch(/ENV\/PROXY needs an X\.509 proxy, but the job has a token delegation only/);
      }
      const t = await submit(as, '&(executable="/bin/true")(runtimeenvironment="ENV/TOKEN")');
      expect(t["status-code"]).toBe("400");
      expect(t.reason).toMatch(/ENV\/TOKEN needs a bearer token, but the job has no delegation/);

      // E9 get without Accept: the stored token as application/jwt, to its owner.
      const got = await call(stack, as, "POST", `delegations/${deleg}?action=get`);
      expect([got.status, got.headers["content-type"], got.body]).toEqual([200, "application/jwt", delegated]);
      const refused = await call(stack, { token: readOnly }, "POST", `delegations/${deleg}?action=get`, {
        headers: { accept: "application/json" },
      });
      expect(refused.status).toBe(403);
      expect(refused.body).toMatch(/compute\.create/);
      expect(refused.body).not.toContain(delegated.split(".")[2]!);

      // The job page of a token job: issuer, subject and the VO from wlcg.groups; never a token.
      const job = await submit(as, '&(executable="/bin/true")(runtimeenvironment="ENV/TOKEN")', deleg);
      expect(job["status-code"]).toBe("201");
      const page = await call(stack, as, "GET", `jobs/${job.id}`, { headers: { accept: "text/html" } });
      expect(page.status).toBe(200);
      expect(page.body).toContain(`<dt>Token issuer</dt><dd><span class="mono">${issuer.issuer}</span></dd>`);
      expect(page.body).toContain('<dt>Token subject</dt><dd><span class="mono">tok-user</span></dd>');
      expect(page.body).toContain("<dt>VO</dt><dd>dteam</dd>");
      for (const secret of [token, delegated]) expect(page.body).not.toContain(secret.split(".")[2]!);
      const info = await call(stack, as, "GET", "info", { headers: { accept: "application/json" } });
      expect(info.status).toBe(200);
      expect(info.body).not.toContain(delegated.split(".")[2]!);
    },
    60_000,
  );
});
