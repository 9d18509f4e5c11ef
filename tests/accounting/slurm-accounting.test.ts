/**
 * Issue 24's acceptance run on a real single-node Slurm and a whole CE (JEM + gateway processes):
 * 20 jobs from three kinds of identity — a VOMS proxy, a token with `wlcg.groups`, a plain DN,
 * each mapped to its own real account — with the JEM SIGKILLed while they run and every job
 * cleaned afterwards, leave exactly 20 usage records with the right VO, FQAN, account and uid, and
 * the wall time, start, end, processors and nodes of Slurm's own record of each job.
 *
 * The test Slurm has no accounting storage (no slurmdbd): its record is the job completion log
 * (jobcomp/filetxt, `sacct -c`), which has no CPU time. CPU comes from the job wrapper; each job
 * burns a known amount of process CPU time (python's process_time), which the record must hold
 * within rounding.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_VOMS_FAKE } from "@ce/x509/testing";
import { AccountingDb, type UsageRecord } from "../../packages/accounting/src/index.js";
import { TestAccounts } from "../../packages/mapping/src/test-accounts.js";
import { restCall, waitFor } from "../arc/arc-tools.js";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "../support/slurm-cluster.js";
import { startStack, type Stack } from "../support/stack.js";
import { startTokenIssuer, type TokenIssuer } from "../support/token-issuer.js";
import { stackVoms } from "../support/voms.js";

const ROOT = process.getuid?.() === 0;
const N = { voms: 7, token: 7, dn: 6 } as const;
type Kind = keyof typeof N;
/** Process CPU seconds job i burns (1 or 2), then it sleeps 1 s: wall ≥ CPU on one processor. */
const cpuOf = (i: number) => 1 + (i % 2);
const jobXrsl = (i: number) =>
  `&(executable="/usr/bin/python3")(arguments="-c" "import time; all(iter(lambda: time.process_time() < ${cpuOf(i)}, False)); time.sleep(1)")(jobname="acct${i}")`;

interface Http {
  status: number;
  body: string;
}

describe.skipIf(!HAS_SLURM || !HAS_VOMS_FAKE || !ROOT)(
  "accounting on Slurm: 20 jobs, three identities, a JEM crash, every job cleaned",
  () => {
    const accounts = new TestAccounts();
    const acct: Record<Kind, string> = { voms: "", token: "", dn: "" };
    let slurm: SlurmCluster;
    let issuer: TokenIssuer;
    let stack: Stack;
    let vomsProxy = "";
    let dnCred = "";
    let token = "";

    beforeAll(async () => {
      acct.voms = await accounts.add("vo");
      acct.token = await accounts.add("tk");
      acct.dn = await accounts.add("dn");
      slurm = await startSlurm(`/tmp/ce-slurm-a${process.pid}`);
      issuer = await startTokenIssuer({ audience: "set-per-token" });
      stack = await startStack({
        redisUrl: inject("redisUrl"),
        redisUsers: inject("redisUsers"),
        backend: "slurm",
        env: { SLURM_CONF: slurm.conf },
        config: {
          auth: { tokens: { issuers: [{ issuer: issuer.issuer, caFile: issuer.caFile }] } },
          mapping: {
            rules: [
              { name: "atlas", match: "vo:atlas", user: acct.voms },
              { name: "tokens", match: "kind:token", user: acct.token },
              { name: "rest", match: "*", user: acct.dn },
            ],
          },
          accounting: { apel: { vomslessVo: "dteam" } },
        },
        prepare: (state) => {
          vomsProxy = stackVoms(state, ["atlas"]).proxy(join(state, "pki", "user", "voms-proxy.pem"), {
            vo: "atlas",
            fqans: ["/atlas/Role=production", "/atlas"],
          });
          dnCred = join(state, "pki", "user", "cred.pem");
          writeFileSync(
            dnCred,
            readFileSync(join(state, "pki", "user", "cert.pem"), "utf8") + readFileSync(join(state, "pki", "user", "key.pem"), "utf8"),
            { mode: 0o600 },
          );
        },
      });
      token = await issuer.mint({ aud: new URL(stack.url).origin, sub: "acct-user", "wlcg.groups": ["/cms/production", "/cms"] });
    }, 240_000);

    afterAll(async () => {
      await stack?.stop();
      await issuer?.close();
      slurm?.stop();
      await accounts.remove();
    }, 60_000);

    const ca = () => join(stack.pki, "ca", "ca.pem");
    const bearer = (method: string, url: string, body?: string, type = "application/json"): Promise<Http> =>
      new Promise((resolve, reject) => {
        const req = request(
          url,
          {
            method,
            ca: readFileSync(ca()),
            agent: false,
            headers: { authorization: `Bearer ${token}`, accept: "application/json", ...(body ? { "content-type": type } : {}) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (d: Buffer) => chunks.push(d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const call = (kind: Kind, method: string, path: string, body?: string, type = "application/json"): Promise<Http> => {
      const url = `${stack.url}/rest/1.0/${path}`;
      if (kind === "token") return bearer(method, url, body, type);
      return restCall({
        url,
        method,
        proxyFile: kind === "voms" ? vomsProxy : dnCred,
        caFile: ca(),
        ...(body ? { body, headers: { "content-type": type } } : {}),
      });
    };
    const ids = (r: Http): string[] => {
      const j = (JSON.parse(r.body) as { job?: unknown }).job;
      return (Array.isArray(j) ? j : [j]).map((x) => (x as { id?: string }).id).filter((x): x is string => typeof x === "string");
    };
    const states = async (kind: Kind, jobIds: string[]): Promise<Map<string, string>> => {
      const r = await call(kind, "POST", "jobs?action=status", JSON.stringify({ job: jobIds.map((id) => ({ id })) }));
      const j = (JSON.parse(r.body) as { job?: unknown }).job;
      const items = (Array.isArray(j) ? j : [j]) as Array<{ id?: string; state?: string; "status-code"?: string }>;
      return new Map(items.map((x) => [x.id ?? "", x["status-code"] === "404" ? "gone" : (x.state ?? "?")]));
    };
    /** Slurm's own record of each job (jobcomp log), epoch seconds. */
    const jobcomp = (localIds: string[]) => {
      const out = execFileSync(
        "sacct",
        ["-c", "-n", "-P", "-j", localIds.join(","), "-o", "JobID,Start,End,ElapsedRaw,NCPUS,NNodes,NodeList"],
        {
          env: { ...process.env, SLURM_CONF: slurm.conf, SLURM_TIME_FORMAT: "%s" },
          encoding: "utf8",
        },
      );
      const m = new Map<string, { start: number; end: number; wall: number; ncpus: number; nnodes: number; nodes: string }>();
      for (const l of out.trim().split("\n")) {
        const [id, start, end, wall, ncpus, nnodes, nodes] = l.split("|");
        m.set(id!, {
          start: Number(start),
          end: Number(end),
          wall: Number(wall),
          ncpus: Number(ncpus),
          nnodes: Number(nnodes),
          nodes: nodes!,
        });
      }
      return m;
    };
    const uid = (name: string) => Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());

    it("leaves exactly one record per job with the identity's VO, FQAN and account and Slurm's times", { timeout: 300_000 }, async () => {
      const t0 = Date.now();
      const byKind: Record<Kind, string[]> = { voms: [], token: [], dn: [] };
      const cpu = new Map<string, number>();
      let i = 0;
      for (const kind of ["voms", "token", "dn"] as const) {
        const xrsl = Array.from({ length: N[kind] }, (_, k) => jobXrsl(i + k));
        const r = await call(kind, "POST", "jobs?action=new", `+${xrsl.map((x) => `(${x})`).join("")}`, "application/rsl");
        expect(r.status, r.body).toBe(201);
        const got = ids(r);
        expect(got).toHaveLength(N[kind]);
        got.forEach((id, k) => cpu.set(id, cpuOf(i + k)));
        byKind[kind] = got;
        i += N[kind];
      }
      const all = [...byKind.voms, ...byKind.token, ...byKind.dn];

      // The JEM dies (SIGKILL) once some jobs run in Slurm and none has ended yet, and comes back.
      const atKill = await waitFor(
        "jobs running in Slurm",
        async () => {
          const s = [...(await states("voms", byKind.voms)).values()];
          return s.some((x) => x === "RUNNING") ? s : undefined;
        },
        120_000,
        500,
      );
      await stack.restartJem();
      // The kill came while the identity's jobs were still in the batch system, not after.
      expect(atKill.filter((x) => x === "FINISHED").length).toBeLessThan(N.voms);

      const terminal = new Set(["FINISHED", "FAILED", "KILLED"]);
      const ended = await waitFor(
        "all 20 jobs ended",
        async () => {
          const m = new Map<string, string>();
          for (const kind of ["voms", "token", "dn"] as const) for (const [id, s] of await states(kind, byKind[kind])) m.set(id, s);
          return all.every((id) => terminal.has(m.get(id) ?? "")) ? m : undefined;
        },
        180_000,
        1000,
      );
      expect(
        [...ended.values()].every((s) => s === "FINISHED"),
        JSON.stringify([...ended]),
      ).toBe(true);

      for (const kind of ["voms", "token", "dn"] as const) {
        const r = await call(kind, "POST", "jobs?action=clean", JSON.stringify({ job: byKind[kind].map((id) => ({ id })) }));
        expect([200, 201], r.body).toContain(r.status);
      }
      await waitFor(
        "every job cleaned",
        async () => {
          for (const kind of ["voms", "token", "dn"] as const) {
            if ([...(await states(kind, byKind[kind])).values()].some((s) => s !== "gone")) return undefined;
          }
          return true;
        },
        60_000,
        1000,
      );

      const db = await AccountingDb.open(undefined, stack.state);
      let recs: UsageRecord[] = [];
      try {
        recs = await waitFor(
          "20 usage records",
          async () => {
            const r = await db.endedBetween(0, 2 ** 31);
            return r.length >= all.length ? r : undefined;
          },
          60_000,
          500,
        );
        // Nothing more arrives later (a doubled record would be a second row for a job).
        await new Promise((r) => setTimeout(r, 2000));
        recs = await db.endedBetween(0, 2 ** 31);
      } finally {
        await db.close();
      }
      expect(recs).toHaveLength(20);
      expect(new Set(recs.map((r) => r.jobId))).toEqual(new Set(all));

      const slurmRecs = jobcomp(recs.map((r) => r.batchId!));
      const want: Record<Kind, Partial<UsageRecord>> = {
        voms: {
          vo: "atlas",
          fqan: "/atlas/Role=production",
          voGroup: "/atlas",
          voRole: "Role=production",
          fqans: ["/atlas/Role=production", "/atlas"],
          account: acct.voms,
          uid: uid(acct.voms),
          tokenIssuer: null,
        },
        token: {
          vo: "cms",
          fqan: "/cms/production",
          voGroup: "/cms/production",
          voRole: null,
          fqans: ["/cms/production", "/cms"],
          account: acct.token,
          uid: uid(acct.token),
          ownerDn: null,
          tokenIssuer: issuer.issuer,
          tokenSubject: "acct-user",
        },
        dn: { vo: "dteam", fqan: null, voGroup: "/dteam", fqans: [], account: acct.dn, uid: uid(acct.dn), tokenIssuer: null },
      };
      const rows: string[] = [];
      for (const r of recs) {
        const kind = (Object.keys(byKind) as Kind[]).find((k) => byKind[k].includes(r.jobId))!;
        expect(r, `${kind} job ${r.jobId}`).toMatchObject({ ...want[kind], state: "FINISHED", exitCode: 0, queue: expect.any(String) });
        if (kind !== "token") expect(r.ownerDn).toMatch(/CN=/);
        const s = slurmRecs.get(r.batchId!);
        expect(s, `jobcomp record of Slurm job ${r.batchId}`).toBeDefined();
        // Slurm's figures, exactly: the record took them from the jobcomp log, not from the wrapper.
        expect({ start: r.startTime, end: r.endTime, wall: r.wallSeconds, processors: r.processors, nodeCount: r.nodeCount }).toEqual({
          start: s!.start,
          end: s!.end,
          wall: s!.wall,
          processors: s!.ncpus,
          nodeCount: s!.nnodes,
        });
        // CPU: what the job burned (process time), within rounding; never more than its wall time allows.
        const c = cpu.get(r.jobId)!;
        expect(r.cpuSeconds, `CPU of ${r.jobId}`).toBeGreaterThanOrEqual(c);
        expect(r.cpuSeconds, `CPU of ${r.jobId}`).toBeLessThanOrEqual(c + 1);
        expect(r.cpuUserSeconds + r.cpuSystemSeconds).toBeGreaterThanOrEqual(r.cpuSeconds - 1);
        expect(r.wallSeconds).toBeGreaterThanOrEqual(c);
        rows.push(`${kind} ${r.batchId} wall=${r.wallSeconds}/${s!.wall} cpu=${r.cpuSeconds}/${c}`);
      }
      console.log(`accounting acceptance: ${recs.length} records in ${Math.round((Date.now() - t0) / 1000)} s\n${rows.join("\n")}`);
    });
  },
);
