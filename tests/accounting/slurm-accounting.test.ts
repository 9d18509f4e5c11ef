/**
 * Issue 24's acceptance run on a real single-node Slurm with accounting storage (slurmdbd) and a
 * whole CE (JEM + gateway processes) keeping its records in PostgreSQL: 20 jobs from three kinds of
 * identity — a VOMS proxy, a token with `wlcg.groups`, a plain DN, each mapped to its own real
 * account — with the JEM SIGKILLed while they run and every job cleaned afterwards, leave exactly 20
 * usage records with the right VO, FQAN, account and uid, and `sacct`'s wall, CPU (user + system),
 * maximum RSS, start, end, processors and nodes of each job. Some jobs burn CPU and hold memory,
 * some only sleep, so the figures differ from job to job.
 *
 * Then, with `ceadm accounting`'s code: the dry-run messages of all three kinds (individual job
 * records, summaries v0.2 and v0.3, sync), signed, pass `openssl smime -verify` against the test CA
 * and APEL's loader rules (loader-check.ts) and carry those same values; a stand-in ARGO endpoint
 * on loopback receives each record once, a second run sends nothing, and `republish` sends the
 * same records again. SQLite, the default database, runs the same path in slurmdbd.test.ts.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_VOMS_FAKE } from "@ce/x509/testing";
import { AccountingDb, type UsageRecord } from "../../packages/accounting/src/index.js";
import { TestAccounts } from "@ce/mapping/testing";
import { waitFor } from "../arc/arc-tools.js";
import { startPostgres, type PostgresHandle } from "@ce/testing/postgres";
import { HAS_SLURMDBD, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { stackVoms } from "@ce/testing/voms";
import {
  ceadmAccounting,
  ceClient,
  jobIds,
  sacctJobs,
  startArgoStandIn,
  sum,
  summedBy,
  syncCount,
  verifyAndCheck,
  type ArgoStandIn,
  type SacctJob,
} from "./acceptance-support.js";
import { quietPeriod } from "@ce/testing";

const ROOT = process.getuid?.() === 0;
const N = { voms: 7, token: 7, dn: 6 } as const;
type Kind = keyof typeof N;
/** Job i: every third burns 2 s of process CPU holding 100 MiB, the next 1 s, the third none; each then sleeps 1 s. */
const cpuOf = (i: number) => [2, 1, 0][i % 3]!;
const mibOf = (i: number) => (i % 3 === 0 ? 100 : 0);
const jobXrsl = (i: number) =>
  `&(executable="/usr/bin/python3")(arguments="-c" "import time; b = bytearray(${mibOf(i)} << 20); all(iter(lambda: time.process_time() < ${cpuOf(i)}, False)); time.sleep(1)")(jobname="acct${i}")`;
const BENCHMARK = { type: "HEPscore23", value: 12.5 } as const;

describe.skipIf(!HAS_SLURMDBD || !HAS_VOMS_FAKE || !ROOT)(
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
    let pg: PostgresHandle;
    let argo: ArgoStandIn;
    let out = "";

    beforeAll(async () => {
      acct.voms = await accounts.add("vo");
      acct.token = await accounts.add("tk");
      acct.dn = await accounts.add("dn");
      const t0 = Date.now();
      slurm = await startSlurm(`/tmp/ce-slurm-a${process.pid}`, { accounting: true });
      // Associations are enforced: each mapped account needs one to submit at all.
      slurm.sacctmgr("add", "account", "grid");
      slurm.sacctmgr("add", "user", `${acct.voms},${acct.token},${acct.dn}`, "account=grid");
      pg = await startPostgres();
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
          jobs: { queues: [{ name: "main", benchmark: BENCHMARK }] },
          accounting: { database: pg.url, apel: { vomslessVo: "dteam", site: "TEST-SITE", batchSize: 8 } },
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
      argo = await startArgoStandIn(join(stack.pki, "host", "cert.pem"), join(stack.pki, "host", "key.pem"), "argo-key");
      out = mkdtempSync(join(tmpdir(), "ce-apel-"));
      console.log(`accounting acceptance: Slurm with slurmdbd, PostgreSQL and CE up in ${Math.round((Date.now() - t0) / 1000)} s`);
    }, 240_000);

    afterAll(async () => {
      await stack?.stop();
      await issuer?.close();
      await argo?.close();
      slurm?.stop();
      await pg?.stop();
      if (out) rmSync(out, { recursive: true, force: true });
      await accounts.remove();
    }, 60_000);

    const ca = () => join(stack.pki, "ca", "ca.pem");
    const client = (kind: Kind) =>
      ceClient({
        baseUrl: stack.url,
        caFile: ca(),
        ...(kind === "token" ? { token } : { proxyFile: kind === "voms" ? vomsProxy : dnCred }),
      });
    const call = (kind: Kind, method: string, path: string, body?: string, type?: string) => client(kind).call(method, path, body, type);
    const states = (kind: Kind, jobIds: string[]) => client(kind).states(jobIds);
    const uid = (name: string) => Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
    const byKind: Record<Kind, string[]> = { voms: [], token: [], dn: [] };
    const kindOf = (jobId: string) => (Object.keys(byKind) as Kind[]).find((k) => byKind[k].includes(jobId))!;
    const cpu = new Map<string, number>();
    const mib = new Map<string, number>();
    /** The 20 records, and sacct's accounting of each by Slurm job id (set by the first test). */
    let recs: UsageRecord[] = [];
    let sacct = new Map<string, SacctJob>();

    it("leaves exactly one record per job with the identity's VO, FQAN and account and sacct's figures", { timeout: 300_000 }, async () => {
      const t0 = Date.now();
      let i = 0;
      for (const kind of ["voms", "token", "dn"] as const) {
        const xrsl = Array.from({ length: N[kind] }, (_, k) => jobXrsl(i + k));
        const r = await call(kind, "POST", "jobs?action=new", `+${xrsl.map((x) => `(${x})`).join("")}`, "application/rsl");
        expect(r.status, r.body).toBe(201);
        const got = jobIds(r);
        expect(got).toHaveLength(N[kind]);
        got.forEach((id, k) => (cpu.set(id, cpuOf(i + k)), mib.set(id, mibOf(i + k))));
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

      const db = await AccountingDb.open(pg.url, stack.state);
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
        await quietPeriod(2_000, "a doubled record would arrive after the first ones");
        recs = await db.endedBetween(0, 2 ** 31);
      } finally {
        await db.close();
      }
      expect(recs).toHaveLength(20);
      expect(new Set(recs.map((r) => r.jobId))).toEqual(new Set(all));

      sacct = sacctJobs(
        slurm.conf,
        recs.map((r) => r.batchId!),
      );
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
        const kind = kindOf(r.jobId);
        expect(r, `${kind} job ${r.jobId}`).toMatchObject({ ...want[kind], state: "FINISHED", exitCode: 0, queue: "main" });
        expect({ type: r.benchmarkType, value: r.benchmarkValue }).toEqual(BENCHMARK);
        if (kind !== "token") expect(r.ownerDn).toMatch(/CN=/);
        const s = sacct.get(r.batchId!);
        expect(s, `sacct record of Slurm job ${r.batchId}`).toBeDefined();
        // Slurm's figures: the record took them from accounting storage, not from the wrapper.
        expect({ start: r.startTime, end: r.endTime, wall: r.wallSeconds, processors: r.processors, nodeCount: r.nodeCount }).toEqual({
          start: s!.start,
          end: s!.end,
          wall: s!.wall,
          processors: s!.ncpus,
          nodeCount: s!.nnodes,
        });
        // CPU: sacct's TotalCPU (rounded to whole seconds), its user and system parts.
        const near = (a: number, b: number, what: string) =>
          expect(Math.abs(a - b), `${what} of ${r.batchId}: ${a} vs ${b}`).toBeLessThanOrEqual(0.5);
        near(r.cpuSeconds, s!.cpu, "CPU");
        near(r.cpuUserSeconds, s!.user, "user CPU");
        near(r.cpuSystemSeconds, s!.sys, "system CPU");
        // Each is rounded on its own: user + system is the CPU time within a second.
        expect(Math.abs(r.cpuUserSeconds + r.cpuSystemSeconds - r.cpuSeconds), s!.lines.join("\n")).toBeLessThanOrEqual(1);
        // KiB exactly as sacct has it; when Slurm sampled none of the job's steps (a short job
        // between two samples: MaxRSS 0), the record keeps the job wrapper's own figure instead.
        if (s!.rssKb > 0) expect(r.maxRssKb ?? 0, `MaxRSS of ${r.batchId}`).toBe(s!.rssKb);
        // What the job did shows in Slurm's figures: its CPU burn, its memory.
        const c = cpu.get(r.jobId)!;
        expect(s!.cpu, `sacct CPU of ${r.batchId}`).toBeGreaterThanOrEqual(c - 0.1);
        expect(s!.cpu).toBeLessThanOrEqual(c + 1);
        if (mib.get(r.jobId)) expect(s!.rssKb, `sacct MaxRSS of ${r.batchId}`).toBeGreaterThan(mib.get(r.jobId)! * 1024);
        expect(r.wallSeconds).toBeGreaterThanOrEqual(c);
        rows.push(`${kind} ${r.batchId} wall=${r.wallSeconds}/${s!.wall} cpu=${r.cpuSeconds}/${s!.cpu} rssKb=${r.maxRssKb}/${s!.rssKb}`);
      }
      console.log(`accounting acceptance: ${recs.length} records in ${Math.round((Date.now() - t0) / 1000)} s\n${rows.join("\n")}`);
    });

    /** `ceadm accounting <sub>` on the stack's configuration with these APEL settings; the messages written or sent. */
    const ceadm = (apel: Record<string, unknown>, sub: "apel" | "republish", extra: { out?: string; from?: string; to?: string } = {}) =>
      ceadmAccounting(stack.config, apel, sub, extra);
    const dryRun = async (messages: string) => {
      const dir = join(out, messages);
      await ceadm({ messages }, "apel", { out: dir });
      // Each file as APEL's receiver gets it: signature checked against the test CA, then the loader's rules.
      return readdirSync(dir)
        .sort()
        .map((f) => verifyAndCheck(readFileSync(join(dir, f), "utf8"), ca()));
    };
    const want = (r: UsageRecord) =>
      ({
        voms: { VO: "atlas", VOGroup: "/atlas", VORole: "Role=production" },
        token: { VO: "cms", VOGroup: "/cms/production", VORole: "Role=NULL" },
        dn: { VO: "dteam", VOGroup: "/dteam", VORole: "Role=NULL" },
      })[kindOf(r.jobId)];
    const summed = (g: Record<string, string>) => summedBy(g, recs, want);

    it("dry run, individual records: signed, accepted by APEL's loader rules, with sacct's figures and the identity's VO and FQAN", async () => {
      expect(recs, "the acceptance run came first").toHaveLength(20);
      const checked = await dryRun("individual");
      expect(checked.map((c) => c.kind)).toEqual(["job v0.3", "job v0.3", "job v0.3", "sync v0.1"]);
      const jobs = checked.filter((c) => c.kind === "job v0.3").flatMap((c) => c.records);
      expect(jobs.map((j) => j.LocalJobId).sort()).toEqual(recs.map((r) => r.batchId!).sort());
      for (const r of recs) {
        const s = sacct.get(r.batchId!)!;
        const m = jobs.find((j) => j.LocalJobId === r.batchId)!;
        expect(m, `record of ${r.batchId}`).toMatchObject({
          ...want(r),
          Site: "TEST-SITE",
          Queue: "main",
          LocalUserId: r.account!,
          GlobalUserName: r.owner,
          WallDuration: String(s.wall),
          CpuDuration: String(Math.round(s.cpu)),
          Processors: String(s.ncpus),
          NodeCount: String(s.nnodes),
          StartTime: String(s.start),
          EndTime: String(s.end),
          ServiceLevelType: BENCHMARK.type,
          ServiceLevel: String(BENCHMARK.value),
        });
        expect(m.MemoryReal).toBe(s.rssKb ? String(s.rssKb) : r.maxRssKb ? String(r.maxRssKb) : undefined);
        // APEL derives VO, group and role from a VOMS job's FQAN; token and plain-DN jobs send none.
        expect(m.FQAN).toBe(kindOf(r.jobId) === "voms" ? "/atlas/Role=production" : undefined);
      }
      expect(syncCount(checked)).toBe(20);
    });

    it("dry run, summaries v0.2 and v0.3: counts, wall and CPU sums (normalised by the queue's benchmark) of the same jobs", async () => {
      expect(recs, "the acceptance run came first").toHaveLength(20);
      for (const messages of ["summaries", "summaries-v0.3"]) {
        const checked = await dryRun(messages);
        const kind = messages === "summaries" ? "summary v0.2" : "normalised summary v0.3";
        expect(checked.at(-1)!.kind).toBe("sync v0.1");
        const groups = checked.filter((c) => c.kind === kind).flatMap((c) => c.records);
        expect(groups.length, `${kind} records`).toBeGreaterThanOrEqual(3);
        for (const g of groups) {
          const rs = summed(g);
          const wall = sum(rs, (r) => sacct.get(r.batchId!)!.wall);
          const cpuSum = sum(rs, (r) => r.cpuSeconds);
          expect(Math.abs(cpuSum - sum(rs, (r) => sacct.get(r.batchId!)!.cpu)), `${kind} CPU vs sacct`).toBeLessThanOrEqual(
            0.5 * rs.length,
          );
          expect(g, `${kind} ${g.VO} ${g.VOGroup} ${g.VORole}`).toMatchObject({
            NumberOfJobs: String(rs.length),
            WallDuration: String(wall),
            CpuDuration: String(cpuSum),
            EarliestEndTime: String(Math.min(...rs.map((r) => r.endTime))),
            LatestEndTime: String(Math.max(...rs.map((r) => r.endTime))),
            ...(kind === "summary v0.2"
              ? { ServiceLevelType: BENCHMARK.type, ServiceLevel: String(BENCHMARK.value) }
              : {
                  NormalisedWallDuration: String(Math.round(wall * BENCHMARK.value)),
                  NormalisedCpuDuration: String(Math.round(cpuSum * BENCHMARK.value)),
                }),
          });
        }
        // Every job in exactly one group; per VO, the identity's job count.
        expect(sum(groups, (g) => Number(g.NumberOfJobs))).toBe(20);
        for (const k of ["voms", "token", "dn"] as const) {
          const vo = want(recs.find((r) => kindOf(r.jobId) === k)!).VO;
          expect(
            sum(
              groups.filter((g) => g.VO === vo),
              (g) => Number(g.NumberOfJobs),
            ),
          ).toBe(N[k]);
        }
        expect(syncCount(checked)).toBe(20);
      }
    });

    it("publishes to a stand-in ARGO endpoint once; a second run sends nothing; republish sends the same records again", async () => {
      expect(recs, "the acceptance run came first").toHaveLength(20);
      const apel = { messages: "individual", targetUrl: argo.url, token: "argo-key", caFile: ca() };
      const sent = () => argo.received.map((m) => verifyAndCheck(m.data, ca()));
      const jobsIn = (c: ReturnType<typeof sent>) =>
        c
          .filter((m) => m.kind === "job v0.3")
          .flatMap((m) => m.records)
          .sort((a, b) => a.LocalJobId!.localeCompare(b.LocalJobId!));
      expect(await ceadm(apel, "apel")).toEqual({ messages: 4, records: 20 });
      expect(argo.received.map((m) => m.path)).toEqual(Array(4).fill("/v1/projects/accounting/topics/gLite-APEL:publish"));
      const first = sent();
      expect(jobsIn(first).map((j) => j.LocalJobId)).toEqual(recs.map((r) => r.batchId!).sort());
      expect(syncCount(first)).toBe(20);

      expect(await ceadm(apel, "apel")).toEqual({ messages: 0, records: 0 });
      expect(argo.received).toHaveLength(4);

      const day = (t: number) => new Date(t * 1000).toISOString().slice(0, 10);
      const ends = recs.map((r) => r.endTime);
      expect(await ceadm(apel, "republish", { from: day(Math.min(...ends)), to: day(Math.max(...ends)) })).toEqual({
        messages: 4,
        records: 20,
      });
      const again = sent().slice(4);
      expect(jobsIn(again)).toEqual(jobsIn(first));
      expect(syncCount(again)).toBe(20);
    });
  },
);
