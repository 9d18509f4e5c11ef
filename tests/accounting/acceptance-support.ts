/**
 * Helpers of the accounting acceptance run (slurm-accounting.test.ts): Slurm's own accounting of
 * jobs (`sacct` against slurmdbd), signed APEL messages read back as APEL's receiver would, and a
 * stand-in for the ARGO Messaging Service publish call on loopback (not the real service).
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, request, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { loadConfig } from "@ce/config";
import type { UsageRecord } from "../../packages/accounting/src/index.js";
import { checkApelMessage, type CheckedMessage } from "../../packages/accounting/src/apel/loader-check.js";
import { accountingCommand } from "../../packages/ops/src/cli-accounting.js";
import { restCall } from "../arc/arc-tools.js";

export interface SacctJob {
  start: number;
  end: number;
  wall: number;
  ncpus: number;
  nnodes: number;
  /** TotalCPU, UserCPU, SystemCPU of the allocation (all its steps), seconds. */
  cpu: number;
  user: number;
  sys: number;
  /** The largest MaxRSS of the job's steps, KiB (0: none sampled). */
  rssKb: number;
  /** sacct's lines of the job and its steps, as printed (for messages). */
  lines: string[];
}

/** `[D-][HH:]MM:SS[.fff]` → seconds. */
export function sacctSeconds(v: string): number {
  const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/.exec(v);
  return m ? ((Number(m[1] ?? 0) * 24 + Number(m[2] ?? 0)) * 60 + Number(m[3])) * 60 + Number(m[4]) : Number.NaN;
}

/** `1234K` / `12.5M` / `1G` / plain bytes → KiB, rounded; 0 for anything else (no sample). */
export function sacctKib(v: string): number {
  const m = /^(\d+(?:\.\d+)?)([KMGT]?)$/.exec(v);
  return m ? Math.round(Number(m[1]) * { K: 1, M: 1024, G: 1024 ** 2, T: 1024 ** 3, "": 1 / 1024 }[m[2] as "K"]) : 0;
}

/** `sacct -D` for these Slurm job ids (accounting storage, not the completion log), epoch-second times. */
export function sacctJobs(conf: string, localIds: readonly string[]): Map<string, SacctJob> {
  const out = execFileSync(
    "sacct",
    ["-n", "-P", "-D", "-j", localIds.join(","), "-o", "JobID,Start,End,ElapsedRaw,NCPUS,NNodes,TotalCPU,UserCPU,SystemCPU,MaxRSS"],
    { env: { ...process.env, SLURM_CONF: conf, SLURM_TIME_FORMAT: "%s" }, encoding: "utf8" },
  );
  const rows = out
    .trim()
    .split("\n")
    .map((l) => l.split("|"));
  const jobs = new Map<string, SacctJob>();
  for (const [id, start, end, wall, ncpus, nnodes, cpu, user, sys] of rows) {
    if (!id || id.includes(".")) continue;
    const steps = rows.filter((r) => r[0] === id || r[0]!.startsWith(`${id}.`));
    const rssKb = Math.max(0, ...steps.map((r) => sacctKib(r[9] ?? "")));
    jobs.set(id, {
      start: Number(start),
      end: Number(end),
      wall: Number(wall),
      ncpus: Number(ncpus),
      nnodes: Number(nnodes),
      cpu: sacctSeconds(cpu!),
      user: sacctSeconds(user!),
      sys: sacctSeconds(sys!),
      rssKb,
      lines: steps.map((r) => r.join("|")),
    });
  }
  return jobs;
}

/**
 * `openssl smime -verify` against the CA (throws when it refuses), then APEL's loader rules on the
 * content. The signer's chain is checked, not its key usage (`-purpose any`): APEL's receiver does
 * the same, since host certificates are often not issued for S/MIME signing.
 */
export function verifyAndCheck(signed: string, caFile: string): CheckedMessage {
  const text = execFileSync("openssl", ["smime", "-verify", "-CAfile", caFile, "-purpose", "any", "-text"], {
    input: signed,
    stdio: ["pipe", "pipe", "pipe"],
  }).toString();
  return checkApelMessage(text, { strictVo: true });
}

export interface ArgoStandIn {
  url: string;
  /** Each publish call: its path and the decoded message data, in arrival order. */
  received: { path: string; data: string }[];
  close(): Promise<void>;
}

/** Answers `POST /v1/projects/<p>/topics/<t>:publish` with one id per message when the key matches, else 401. */
export async function startArgoStandIn(certFile: string, keyFile: string, key: string): Promise<ArgoStandIn> {
  const received: ArgoStandIn["received"] = [];
  let n = 0;
  const server: Server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.method !== "POST" || req.headers["x-api-key"] !== key) {
        res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: 401, status: "UNAUTHENTICATED" } }));
        return;
      }
      const msgs = (JSON.parse(body) as { messages: { data: string }[] }).messages;
      for (const m of msgs) received.push({ path: req.url ?? "", data: Buffer.from(m.data, "base64").toString("utf8") });
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ messageIds: msgs.map(() => `m${++n}`) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `https://localhost:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export interface Http {
  status: number;
  body: string;
}

/** REST calls to the CE as one identity: a bearer token, or a proxy / certificate+key file. */
export function ceClient(o: { baseUrl: string; caFile: string; token?: string; proxyFile?: string }) {
  const bearer = (method: string, url: string, body?: string, type = "application/json"): Promise<Http> =>
    new Promise((resolve, reject) => {
      const headers = { authorization: `Bearer ${o.token}`, accept: "application/json", ...(body ? { "content-type": type } : {}) };
      const req = request(url, { method, ca: readFileSync(o.caFile), agent: false, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  const call = (method: string, path: string, body?: string, type = "application/json"): Promise<Http> => {
    const url = `${o.baseUrl}/rest/1.0/${path}`;
    if (o.token) return bearer(method, url, body, type);
    return restCall({
      url,
      method,
      proxyFile: o.proxyFile!,
      caFile: o.caFile,
      ...(body ? { body, headers: { "content-type": type } } : {}),
    });
  };
  /** Each job's state, `gone` for one the CE no longer knows (404). */
  const states = async (ids: readonly string[]): Promise<Map<string, string>> => {
    const r = await call("POST", "jobs?action=status", JSON.stringify({ job: ids.map((id) => ({ id })) }));
    const j = (JSON.parse(r.body) as { job?: unknown }).job;
    const items = (Array.isArray(j) ? j : [j]) as Array<{ id?: string; state?: string; "status-code"?: string }>;
    return new Map(items.map((x) => [x.id ?? "", x["status-code"] === "404" ? "gone" : (x.state ?? "?")]));
  };
  return { call, states };
}

/** The job ids of a submission answer. */
export function jobIds(r: Http): string[] {
  const j = (JSON.parse(r.body) as { job?: unknown }).job;
  return (Array.isArray(j) ? j : [j]).map((x) => (x as { id?: string }).id).filter((x): x is string => typeof x === "string");
}

/** `ceadm accounting <sub> [--dry-run --out DIR]` (its code, in process) on a CE configuration with these APEL settings. */
export async function ceadmAccounting(
  configFile: string,
  apel: Record<string, unknown>,
  sub: "apel" | "republish",
  extra: { out?: string; from?: string; to?: string } = {},
): Promise<{ messages: number; records: number }> {
  const config = loadConfig({ file: configFile, env: {}, overrides: { accounting: { apel } } });
  const printed: string[] = [];
  const args = { sub, arg: undefined, dryRun: extra.out !== undefined, ...extra };
  const code = await accountingCommand(
    config,
    args,
    true,
    (t) => printed.push(t),
    () => "",
  );
  if (code !== 0) throw new Error(`ceadm accounting ${sub} exited ${code}: ${printed.join("")}`);
  return JSON.parse(printed.join("")) as { messages: number; records: number };
}

export const sum = <T>(xs: readonly T[], f: (x: T) => number) => xs.reduce((n, x) => n + f(x), 0);

/** Σ NumberOfJobs of the sync messages among these. */
export const syncCount = (c: readonly CheckedMessage[]) =>
  sum(
    c.filter((m) => m.kind === "sync v0.1").flatMap((m) => m.records),
    (x) => Number(x.NumberOfJobs),
  );

/** The records a summary record sums: same month (UTC), user, VO, group, role, processors and nodes. */
export function summedBy(
  g: Record<string, string>,
  recs: readonly UsageRecord[],
  identity: (r: UsageRecord) => { VO: string; VOGroup: string; VORole: string },
): UsageRecord[] {
  return recs.filter((r) => {
    const d = new Date(r.endTime * 1000),
      id = identity(r);
    return (
      String(d.getUTCFullYear()) === g.Year &&
      String(d.getUTCMonth() + 1) === g.Month &&
      r.owner === g.GlobalUserName &&
      id.VO === g.VO &&
      id.VOGroup === g.VOGroup &&
      id.VORole === g.VORole &&
      String(r.processors) === g.Processors &&
      String(r.nodeCount) === g.NodeCount
    );
  });
}
