/**
 * What DIRAC's A-REX plugin reads from /info, on a real single-node Slurm: jobs of two VOs
 * (real VOMS proxies, one VO with dots in its name) in two queues; DIRAC's share lookup, written
 * here from its public description (production-site §5.3), must give the running and waiting
 * numbers squeue gives for each VO's jobs, and the slot numbers must be the cluster's.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_VOMS_FAKE } from "@ce/x509/testing";
import { restCall, waitFor } from "../arc/arc-tools.js";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { startStack, type Stack } from "@ce/testing/stack";
import { stackVoms } from "@ce/testing/voms";

type Json = Record<string, unknown>;

/**
 * DIRAC's lookup (AREXComputingElement getCEStatus): the JSON document without a wrapper,
 * Domains/AdminDomain/Services/ComputingService each indexed as an object (Python would fail on a
 * list there), ComputingShare an object or a list, the first share whose ID ends in
 * `<queue>_<vo lower case>` wins; its RunningJobs and WaitingJobs as integers.
 */
export function diracQueueStatus(ceData: Json, queue: string, vo: string): { running: number; waiting: number } {
  const at = (o: unknown, key: string): unknown => {
    if (o === null || typeof o !== "object" || Array.isArray(o))
      throw new TypeError(`${key}: parent is not an object (${JSON.stringify(o)?.slice(0, 80)})`);
    if (!(key in o)) throw new Error(`KeyError: ${key}`);
    return (o as Json)[key];
  };
  const service = at(at(at(at(ceData, "Domains"), "AdminDomain"), "Services"), "ComputingService");
  const raw = at(service, "ComputingShare");
  const shares = (Array.isArray(raw) ? raw : [raw]) as Json[];
  const magic = `${queue}_${vo.toLowerCase()}`;
  const share = shares.find((s) => String(s.ID).endsWith(magic));
  if (!share) throw new Error(`Could not find the queue ${queue} associated to VO ${vo}`);
  const int = (v: unknown) => {
    if (typeof v !== "string" || !/^-?\d+$/.test(v)) throw new Error(`int(${JSON.stringify(v)})`);
    return Number(v);
  };
  return { running: int(share.RunningJobs), waiting: int(share.WaitingJobs) };
}

/** Job name prefix → VO and queue of the jobs submitted below. */
const JOBS = [
  { name: "atA", vo: "atlas", queue: "main" },
  { name: "atB", vo: "atlas", queue: "main" },
  { name: "vxA", vo: "vo.example.org", queue: "main" },
  { name: "vxB", vo: "vo.example.org", queue: "main" },
  { name: "atD", vo: "atlas", queue: "debug" },
] as const;

describe.skipIf(!HAS_SLURM || !HAS_VOMS_FAKE)("DIRAC's share lookup against /info on Slurm", () => {
  let slurm: SlurmCluster;
  let stack: Stack;
  const proxies: Record<string, string> = {};
  const ca = () => join(stack.pki, "ca", "ca.pem");
  const squeue = () =>
    execFileSync("squeue", ["-h", "-o", "%j %T %P"], { env: { ...process.env, SLURM_CONF: slurm.conf }, encoding: "utf8" });

  beforeAll(async () => {
    slurm = await startSlurm(`/tmp/ce-slurm-d${process.pid}`);
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "slurm",
      env: { SLURM_CONF: slurm.conf },
      config: {
        lrms: { slurm: { infoRefreshSeconds: 1 } },
        // main: VOs from its allow rules; debug: listed VOs (the Slurm partition of the same name).
        jobs: {
          queues: [
            { name: "main", allow: ["vo:atlas", "vo:vo.example.org"] },
            { name: "debug", vos: ["ATLAS"] },
          ],
          defaultQueue: "main",
        },
      },
      prepare: (state) => {
        const voms = stackVoms(state, ["atlas", "vo.example.org"]);
        mkdirSync(join(state, "proxies"), { recursive: true });
        proxies.atlas = voms.proxy(join(state, "proxies", "atlas.pem"), { vo: "atlas", fqans: ["/atlas/Role=production", "/atlas"] });
        proxies["vo.example.org"] = voms.proxy(join(state, "proxies", "vx.pem"), { vo: "vo.example.org", fqans: ["/vo.example.org"] });
      },
    });
  }, 240_000);
  afterAll(async () => {
    await stack?.stop();
    slurm?.stop();
  }, 60_000);

  const info = async (vo: string) => {
    const r = await restCall({
      url: `${stack.url}/rest/1.0/info?schema=glue2`,
      proxyFile: proxies[vo]!,
      caFile: ca(),
      headers: { accept: "application/json" },
    });
    expect(r.status).toBe(200);
    return JSON.parse(r.body) as Json;
  };

  /** squeue's running (R, CG) and pending jobs of one VO in one queue, by our job names. */
  const fromSqueue = (out: string, vo: string, queue: string) => {
    const mine = out
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter(([name, , part]) => JOBS.some((j) => j.name === name && j.vo === vo && j.queue === queue) && part === queue);
    return {
      running: mine.filter(([, st]) => st === "RUNNING" || st === "COMPLETING").length,
      waiting: mine.filter(([, st]) => st === "PENDING").length,
    };
  };

  it(
    "finds <queue>_<vo> for each VO and queue with squeue's running and waiting; slots are the cluster's",
    { timeout: 240_000 },
    async () => {
      // 5 jobs of 3 CPUs on 8: two run, three wait for CPUs.
      for (const j of JOBS) {
        const xrsl = `&(executable="/bin/sleep")(arguments="600")(count=3)(jobname="${j.name}")(queue="${j.queue}")`;
        const r = await restCall({
          url: `${stack.url}/rest/1.0/jobs?action=new`,
          method: "POST",
          proxyFile: proxies[j.vo]!,
          caFile: ca(),
          body: xrsl,
          headers: { "content-type": "application/rsl" },
        });
        expect(r.status, r.body).toBe(201);
      }
      const cases = [
        { queue: "main", vo: "atlas" },
        { queue: "main", vo: "vo.example.org" },
        // DIRAC knows the VO in whatever case; the share ID has it in lower case.
        { queue: "debug", vo: "ATLAS" },
      ];
      const seen = await waitFor(
        "DIRAC's numbers to equal squeue's for every VO and queue",
        async () => {
          const out = squeue();
          if (out.trim().split("\n").length < JOBS.length) return undefined;
          const doc = await info("atlas");
          const got = cases.map((c) => ({
            ...c,
            dirac: diracQueueStatus(doc, c.queue, c.vo),
            squeue: fromSqueue(out, c.vo.toLowerCase(), c.queue),
          }));
          // squeue again: the numbers must not have moved while /info was read; and Slurm's
          // scheduler must have placed what fits (two jobs), which under load takes several passes.
          if (squeue() !== out) return undefined;
          if (got.reduce((n, g) => n + g.squeue.running, 0) < 2) return undefined;
          return got.every((g) => g.dirac.running === g.squeue.running && g.dirac.waiting === g.squeue.waiting) ? { got, doc } : undefined;
        },
        120_000,
        1000,
      );
      const total = seen.got.reduce((a, g) => ({ running: a.running + g.squeue.running, waiting: a.waiting + g.squeue.waiting }), {
        running: 0,
        waiting: 0,
      });
      expect(total).toEqual({ running: 2, waiting: 3 });
      // The VO with dots in its name got its own counts (A-REX would count it as `vo`).
      expect(seen.got[1]!.dirac.running + seen.got[1]!.dirac.waiting).toBe(2);

      const svc = (seen.doc.Domains as Json & { AdminDomain: { Services: { ComputingService: Json } } }).AdminDomain.Services
        .ComputingService;
      const mgr = svc.ComputingManager as Json;
      expect(mgr.TotalSlots).toBe("8");
      // Free slots from sinfo's idle CPUs of the partition, the same for the queue and its VO shares.
      const idle = execFileSync("sinfo", ["-h", "-p", "main", "-o", "%C"], {
        env: { ...process.env, SLURM_CONF: slurm.conf },
        encoding: "utf8",
      })
        .trim()
        .split("/")[1];
      const shares = svc.ComputingShare as Json[];
      const byName = Object.fromEntries(shares.map((s) => [String(s.Name), s]));
      await waitFor(
        "sinfo's idle CPUs in FreeSlots",
        async () => {
          const d = await info("vo.example.org");
          const sh = (d.Domains as never as { AdminDomain: { Services: { ComputingService: { ComputingShare: Json[] } } } }).AdminDomain
            .Services.ComputingService.ComputingShare;
          const free = sh.filter((s) => String(s.Name).startsWith("main")).map((s) => s.FreeSlots);
          return free.length === 3 && free.every((f) => f === idle) ? free : undefined;
        },
        20_000,
        1000,
      );
      expect(Object.keys(byName)).toEqual(["main", "main_atlas", "main_vo.example.org", "debug", "debug_atlas"]);
      expect(byName.main!.RunningJobs).toBe(String(seen.got[0]!.squeue.running + seen.got[1]!.squeue.running));

      // No share for a VO the queue does not admit: DIRAC's own error.
      expect(() => diracQueueStatus(seen.doc, "debug", "vo.example.org")).toThrow(
        "Could not find the queue debug associated to VO vo.example.org",
      );
    },
  );
});
