/**
 * Helpers for driving the real ARC 6 command-line client: run an arc* tool and keep its exit
 * code, parse `arcstat` output, poll with a deadline, and a small HTTPS/JSON client that
 * authenticates with the user's proxy (to check server-side effects the client does not show).
 */
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { request } from "node:https";
import { waitFor as poll } from "@ce/testing";

export const ARC_TOOLS = [
  "arcproxy",
  "arcinfo",
  "arcsub",
  "arcstat",
  "arcget",
  "arckill",
  "arcclean",
  "arcrenew",
  "arcresume",
  "arcsync",
  "arccat",
];
export const HAS_ARC = ARC_TOOLS.every((t) => existsSync(`/usr/bin/${t}`));

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `/usr/bin/<tool>`; never throws on a non-zero exit (the caller asserts the code). */
export function arc(tool: string, args: string[], opts: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number }): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      `/usr/bin/${tool}`,
      args,
      { env: opts.env, cwd: opts.cwd, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** Fails with the whole transcript when the tool did not exit 0. */
export function ok(r: RunResult, what: string): RunResult {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`);
  return r;
}

export interface ArcJob {
  url: string;
  id: string;
  name?: string;
  state?: string;
  specificState?: string;
  exitCode?: number;
  queue?: string;
  delegationIds: string[];
}

/** `arcstat [-l]` output → jobs by CE job id (the last path segment of the job URL). */
export function parseArcstat(out: string): Map<string, ArcJob> {
  const jobs = new Map<string, ArcJob>();
  let cur: ArcJob | undefined;
  let inDeleg = false;
  for (const line of out.split("\n")) {
    const m = /^Job: (\S+)/.exec(line);
    if (m) {
      cur = { url: m[1]!, id: m[1]!.replace(/.*\//, ""), delegationIds: [] };
      jobs.set(cur.id, cur);
      inDeleg = false;
      continue;
    }
    if (!cur) continue;
    const kv = /^ (\S[^:]*): ?(.*)$/.exec(line);
    if (kv) {
      inDeleg = kv[1] === "Delegation IDs";
      if (kv[1] === "Name") cur.name = kv[2];
      else if (kv[1] === "State") cur.state = kv[2];
      else if (kv[1] === "Specific state") cur.specificState = kv[2];
      else if (kv[1] === "Exit Code") cur.exitCode = Number(kv[2]);
      else if (kv[1] === "Queue") cur.queue = kv[2];
    } else if (inDeleg && /^ {2}\S/.test(line)) cur.delegationIds.push(line.trim());
  }
  return jobs;
}

/** Job URLs from `arcsub` output, in submission order. */
export function submittedJobs(out: string): string[] {
  return [...out.matchAll(/Job submitted with jobid: (\S+)/g)].map((m) => m[1]!);
}

/** Polls `fn` until it returns a value other than undefined, or fails with the last value seen. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000, intervalMs = 500): Promise<T> {
  return poll(what, fn, timeoutMs, { everyMs: intervalMs, retryErrors: true });
}

export interface RestResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS request authenticated with an X.509 proxy file (certificate chain + key in one PEM). */
export function restCall(opts: {
  url: string;
  proxyFile: string;
  caFile: string;
  method?: string;
  body?: string;
  headers?: Record<string, string>;
}): Promise<RestResponse> {
  const pem = readFileSync(opts.proxyFile, "utf8");
  return new Promise((resolve, reject) => {
    const req = request(
      opts.url,
      {
        method: opts.method ?? "GET",
        cert: pem,
        key: pem,
        ca: readFileSync(opts.caFile),
        headers: { accept: "application/json", ...opts.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** First certificate of a PEM chain. */
export function leafCert(pem: string): X509Certificate {
  const end = pem.indexOf("-----END CERTIFICATE-----");
  if (end < 0) throw new Error(`no certificate in ${JSON.stringify(pem.slice(0, 80))}`);
  return new X509Certificate(pem.slice(pem.indexOf("-----BEGIN CERTIFICATE-----"), end + 25));
}

/** Live processes named `comm` whose working directory is `dir` or below (the job's payload). */
export function processesIn(dir: string, comm: string): number[] {
  const pids: number[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cwd = readlinkSync(`/proc/${p}/cwd`);
      const state = readFileSync(`/proc/${p}/stat`, "utf8").replace(/^.*\) /, "")[0];
      if ((cwd === dir || cwd.startsWith(`${dir}/`)) && readFileSync(`/proc/${p}/comm`, "utf8").trim() === comm && state !== "Z")
        pids.push(Number(p));
    } catch {
      // gone or not ours
    }
  }
  return pids;
}
