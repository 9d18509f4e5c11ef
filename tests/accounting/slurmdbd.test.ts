/**
 * A whole CE on a Slurm with accounting storage (private MariaDB + slurmdbd, associations, limits
 * and QOS enforced): issue 26's VO placement and issue 24's "from the batch system where it knows
 * better".
 *
 * - Placement rules map VO atlas to Slurm account `atlas` + QOS `atlasq` and VO cms to `cms` +
 *   `cmsq`; Slurm's own accounting (`sacct -o account,qos`) shows each VO's job under its pair.
 *   The mapped account's default Slurm account is `atlas`, so a cms job lands under `cms` only
 *   because its rule says so.
 * - A rule naming an account Slurm does not know fails the job with Slurm's refusal in words.
 * - The usage record of a job that burns CPU and holds memory has sacct's TotalCPU, UserCPU,
 *   SystemCPU, MaxRSS, start, end and elapsed time, not the wrapper's figures.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AccountingDb, type UsageRecord } from "../../packages/accounting/src/index.js";
import { TestAccounts } from "@ce/mapping/testing";
import { waitFor } from "../arc/arc-tools.js";
import { HAS_SLURMDBD, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";

const ROOT = process.getuid?.() === 0;
const VOS = ["atlas", "cms", "ghost"] as const;
type Vo = (typeof VOS)[number];
/** Holds ~150 MiB and burns 2 s of process CPU: a MaxRSS and a TotalCPU sacct cannot miss. */
const BURN = `&(executable="/usr/bin/python3")(arguments="-c" "import time; b = bytearray(150 << 20); all(iter(lambda: time.process_time() < 2, False)); time.sleep(1)")(jobname="burn")`;

interface Http {
  status: number;
  body: string;
}

describe.skipIf(!HAS_SLURMDBD || !ROOT)("Slurm with slurmdbd: VO placement by account and QOS, usage from sacct", () => {
  const accounts = new TestAccounts();
  let user = "";
  let slurm: SlurmCluster;
  let issuer: TokenIssuer;
  let stack: Stack;
  const tokens = {} as Record<Vo, string>;
  const jobs = {} as Record<Vo, string>;

  beforeAll(async () => {
    const t0 = Date.now();
    user = await accounts.add("sd");
    slurm = await startSlurm(`/tmp/ce-slurm-d${process.pid}`, { accounting: true });
    slurm.sacctmgr("add", "qos", "atlasq,cmsq");
    slurm.sacctmgr("add", "account", "atlas,cms");
    for (const a of ["atlas", "cms"]) slurm.sacctmgr("modify", "account", a, "set", `qos=${a}q`, `defaultqos=${a}q`);
    slurm.sacctmgr("add", "user", user, "account=atlas,cms", "defaultaccount=atlas");
    issuer = await startTokenIssuer({ audience: "set-per-token" });
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "slurm",
      env: { SLURM_CONF: slurm.conf },
      config: {
        auth: { tokens: { issuers: [{ issuer: issuer.issuer, caFile: issuer.caFile }] } },
        mapping: { rules: [{ name: "all", match: "*", user }] },
        lrms: {
          slurm: {
            placement: [
              { match: ["vo:atlas"], account: "atlas", qos: "atlasq" },
              { match: ["vo:cms"], account: "cms", qos: "cmsq" },
              { match: ["vo:ghost"], account: "nosuchaccount" },
            ],
          },
        },
      },
    });
    for (const vo of VOS) tokens[vo] = await issuer.mint({ aud: new URL(stack.url).origin, sub: `${vo}-user`, "wlcg.groups": [`/${vo}`] });
    console.log(`slurmdbd suite: cluster with accounting storage and CE up in ${Math.round((Date.now() - t0) / 1000)} s`);
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await issuer?.close();
    slurm?.stop();
    await accounts.remove();
  }, 60_000);

  const call = (vo: Vo, method: string, path: string, body?: string, type = "application/json"): Promise<Http> =>
    new Promise((resolve, reject) => {
      const headers = { authorization: `Bearer ${tokens[vo]}`, accept: "application/json", ...(body ? { "content-type": type } : {}) };
      const req = request(
        `${stack.url}/rest/1.0/${path}`,
        { method, ca: readFileSync(join(stack.pki, "ca", "ca.pem")), agent: false, headers },
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
  const first = (r: Http) => {
    const j = (JSON.parse(r.body) as { job?: unknown }).job;
    return (Array.isArray(j) ? j[0] : j) as Record<string, unknown>;
  };
  const state = async (vo: Vo) =>
    first(await call(vo, "POST", "jobs?action=status", JSON.stringify({ job: [{ id: jobs[vo] }] }))).state as string;
  const sacct = (localId: string, fields: string) =>
    execFileSync("sacct", ["-n", "-P", "-D", "-j", localId, "-o", fields], {
      env: { ...process.env, SLURM_CONF: slurm.conf, SLURM_TIME_FORMAT: "%s" },
      encoding: "utf8",
    })
      .trim()
      .split("\n")
      .map((l) => l.split("|"));
  const recordOf = async (vo: Vo) => {
    const db = await AccountingDb.open(undefined, stack.state);
    try {
      return await waitFor(
        `usage record of the ${vo} job`,
        async () => (await db.endedBetween(0, 2 ** 31)).find((r) => r.jobId === jobs[vo]),
        60_000,
        500,
      );
    } finally {
      await db.close();
    }
  };
  let records: Partial<Record<Vo, UsageRecord>> = {};

  it(
    "each VO's job runs under its Slurm account and QOS; an unknown account fails the job with Slurm's reason",
    { timeout: 120_000 },
    async () => {
      for (const vo of VOS) {
        const r = await call(
          vo,
          "POST",
          "jobs?action=new",
          vo === "atlas" ? BURN : `&(executable="/bin/true")(jobname="${vo}")`,
          "application/rsl",
        );
        expect(r.status, r.body).toBe(201);
        jobs[vo] = first(r).id as string;
      }
      const terminal = new Set(["FINISHED", "FAILED", "KILLED"]);
      for (const vo of VOS) await waitFor(`${vo} job ended`, async () => (terminal.has(await state(vo)) ? true : undefined), 90_000, 500);
      expect(await state("atlas")).toBe("FINISHED");
      expect(await state("cms")).toBe("FINISHED");
      expect(await state("ghost")).toBe("FAILED");

      records = { atlas: await recordOf("atlas"), cms: await recordOf("cms"), ghost: await recordOf("ghost") };
      for (const vo of ["atlas", "cms"] as const) {
        const id = records[vo]!.batchId!;
        // slurmdbd fills the job's QOS in after its start: wait for the final row.
        const row = await waitFor(
          `sacct account/QOS of ${vo} job ${id}`,
          async () => {
            const [acc, qos] = sacct(id, "Account,QOS")[0] ?? [];
            return qos && qos !== "Unknown" ? [acc, qos] : undefined;
          },
          30_000,
          500,
        );
        expect(row, `sacct -j ${id} -o account,qos`).toEqual([vo, `${vo}q`]);
      }

      // Refused by sbatch, never queued: the reason the user sees is Slurm's own.
      expect(records.ghost!.batchId).toBeNull();
      const info = await call("ghost", "POST", "jobs?action=info", JSON.stringify({ job: [{ id: jobs.ghost }] }));
      expect(info.body).toMatch(/Invalid account/);
      expect(records.ghost!.failure).toMatch(/Invalid account/);
    },
  );

  it(
    "the usage record holds sacct's CPU (user + system), MaxRSS, start, end and wall of a CPU-burning job",
    { timeout: 30_000 },
    async () => {
      const r = records.atlas;
      expect(r, "the placement test ran first").toBeDefined();
      const rows = sacct(r!.batchId!, "JobID,Start,End,ElapsedRaw,TotalCPU,UserCPU,SystemCPU,MaxRSS");
      const secs = (v: string) => {
        const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/.exec(v);
        return m ? ((Number(m[1] ?? 0) * 24 + Number(m[2] ?? 0)) * 60 + Number(m[3])) * 60 + Number(m[4]) : Number.NaN;
      };
      const alloc = rows.find((x) => x[0] === r!.batchId)!;
      const rssKb = Math.max(...rows.map((x) => (/^\d+K$/.test(x[7] ?? "") ? Number(x[7]!.slice(0, -1)) : 0)));
      const s = {
        start: Number(alloc[1]),
        end: Number(alloc[2]),
        wall: Number(alloc[3]),
        cpu: secs(alloc[4]!),
        user: secs(alloc[5]!),
        sys: secs(alloc[6]!),
      };
      console.log(
        `sacct of ${r!.batchId}: ${JSON.stringify({ ...s, rssKb })}; record: ${JSON.stringify({ cpu: r!.cpuSeconds, user: r!.cpuUserSeconds, sys: r!.cpuSystemSeconds, rss: r!.maxRssKb, wall: r!.wallSeconds })}`,
      );
      expect(s.cpu).toBeGreaterThanOrEqual(2);
      expect(rssKb).toBeGreaterThan(150 * 1024);
      expect({ start: r!.startTime, end: r!.endTime, wall: r!.wallSeconds }).toEqual({ start: s.start, end: s.end, wall: s.wall });
      expect(Math.abs(r!.cpuSeconds - s.cpu)).toBeLessThanOrEqual(0.5);
      expect(Math.abs(r!.cpuUserSeconds - s.user)).toBeLessThanOrEqual(0.5);
      expect(Math.abs(r!.cpuSystemSeconds - s.sys)).toBeLessThanOrEqual(0.5);
      // KiB exactly as sacct has it (the wrapper only knows whole MB).
      expect(r!.maxRssKb).toBe(rssKb);
      expect(r!.vo).toBe("atlas");
    },
  );
});
