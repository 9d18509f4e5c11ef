/**
 * Redis trouble is not a crash: a whole CE (gateway + JEM processes, fork back end)
 * on its own AOF-backed redis-server, with jobs in flight, while Redis is (a) killed and restarted
 * from its AOF, (b) refusing writes after a failed snapshot (MISCONF), (c) out of memory (OOM),
 * (d) demoted to a read-only replica (READONLY).
 * Meanwhile the gateway answers 503 with Retry-After and a reason within a few seconds (never a
 * 500, never a hang) and the JEM keeps running; afterwards every acknowledged job reaches FINISHED
 * and ran exactly once, and each process logged the outage once, not once per job.
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, quietPeriod, waitFor } from "@ce/testing";
import { startRedis, type RedisHandle } from "@ce/testing/redis";
import { startStack, type Stack } from "@ce/testing/stack";

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
  ms: number;
}

/** One HTTPS request with the stack's user certificate (curl: real TLS client auth). */
function curl(stack: Stack, args: string[], body = ""): Promise<Reply> {
  const pki = stack.pki;
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const p = spawn("curl", [
      "-s",
      "-i",
      "-m",
      "20",
      "--cacert",
      `${pki}/ca/ca.pem`,
      "--cert",
      `${pki}/user/cert.pem`,
      "--key",
      `${pki}/user/key.pem`,
      ...args,
    ]);
    let out = "";
    p.stdout.on("data", (d) => (out += String(d)));
    p.on("error", reject);
    p.on("close", () => {
      const split = out.indexOf("\r\n\r\n");
      const head = out.slice(0, split).split("\r\n");
      const headers: Record<string, string> = {};
      for (const l of head.slice(1)) {
        const i = l.indexOf(":");
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({ status: Number(head[0]?.split(" ")[1] ?? 0), headers, body: out.slice(split + 4), ms: Date.now() - t0 });
    });
    p.stdin.end(body);
  });
}

const api = (stack: Stack) => `${stack.url}/rest/1.1`;
const submit = (stack: Stack, xrsl: string) =>
  curl(
    stack,
    [
      "-X",
      "POST",
      "-H",
      "Content-Type: application/rsl",
      "-H",
      "Accept: application/json",
      "--data-binary",
      "@-",
      `${api(stack)}/jobs?action=new`,
    ],
    xrsl,
  );
const list = (stack: Stack) => curl(stack, ["-H", "Accept: application/json", `${api(stack)}/jobs`]);

async function states(stack: Stack, ids: string[]): Promise<string[] | undefined> {
  const r = await curl(
    stack,
    [
      "-X",
      "POST",
      "-H",
      "Content-Type: application/json",
      "-H",
      "Accept: application/json",
      "--data-binary",
      "@-",
      `${api(stack)}/jobs?action=status`,
    ],
    JSON.stringify({ job: ids.map((id) => ({ id })) }),
  );
  if (r.status !== 201 && r.status !== 200) return undefined;
  return (JSON.parse(r.body) as { job: { state?: string }[] }).job.map((j) => j.state ?? "?");
}

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms: number, logs?: () => string): Promise<T> {
  return waitFor(what, fn, ms, { everyMs: 250, ...(logs ? { detail: () => logs().slice(-4000) } : {}) });
}

/** Log lines of one process (`svc` of @ce/ops' logger) that contain `text`. */
function lines(stack: Stack, svc: "jem" | "gateway", text: string): string[] {
  return stack
    .logs()
    .split("\n")
    .filter((l) => l.includes(`"svc":"${svc}"`) && l.includes(text));
}

type Fault = "kill" | "misconf" | "oom" | "readonly";

/** What a client sees during the outage: 503 + Retry-After + reason for a write, fast. */
async function gatewayRefuses(s: Stack, fault: Fault): Promise<void> {
  const refused = await submit(s, `&(executable="/bin/true")(jobname="during-${fault}")`);
  expect(refused.status, refused.body).toBe(503);
  expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
  expect(refused.headers["x-error-code"]).toBe("STORE_UNAVAILABLE");
  expect(refused.body).toMatch(/unavailable/i);
  expect(refused.ms).toBeLessThan(8_000);
  const read = await list(s);
  if (fault === "kill") {
    expect(read.status, read.body).toBe(503);
    expect(read.headers["retry-after"]).toBeTruthy();
    expect(read.ms).toBeLessThan(8_000);
  } else expect(read.status, read.body).toBe(200);
}

describe("Redis trouble is not a crash", () => {
  let redis: RedisHandle | undefined;
  let stack: Stack | undefined;
  let runsDir: string | undefined;
  afterEach(async () => {
    // CE_OUTAGE_LOG=<file>: keep the processes' log of the last run (the stack removes its state dir).
    if (process.env.CE_OUTAGE_LOG && stack) writeFileSync(process.env.CE_OUTAGE_LOG, stack.logs());
    await stack?.stop();
    await redis?.stop();
    if (runsDir) rmSync(runsDir, { recursive: true, force: true });
    stack = redis = runsDir = undefined;
  });

  async function outageRun(fault: Fault): Promise<void> {
    redis = await startRedis({ aof: true });
    const r = redis;
    const s = (stack = await startStack({ redisUrl: r.url, redisUsers: r.users, backend: "fork" }));
    // Each job appends its name when it runs: a job run twice shows up twice. World-writable: with
    // mapping on (root) the jobs run as a pool account.
    runsDir = mkdtempSync(join(tmpdir(), "ce-outage-"));
    chmodSync(runsDir, 0o1777);
    const runs = join(runsDir, "runs");
    writeFileSync(runs, "");
    chmodSync(runs, 0o666);

    const names = Array.from({ length: 6 }, (_, i) => `outage-${fault}-${i}`);
    const ids: string[] = [];
    for (const n of names) {
      const res = await submit(s, `&(executable="/bin/sh")(arguments="-c" "echo ${n} >> ${runs}; sleep 3")(jobname="${n}")`);
      expect(res.status, res.body).toBe(201);
      const id = (JSON.parse(res.body) as { job: { id?: string }[] }).job[0]?.id;
      expect(id, res.body).toBeTruthy();
      ids.push(id!);
    }
    // In flight: every job has started in the batch system.
    await until(
      "all jobs running",
      async () => readFileSync(runs, "utf8").trim().split("\n").filter(Boolean).length === names.length,
      30_000,
      s.logs,
    );

    const admin = new Redis(r.adminUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null, lazyConnect: true });
    let restore: () => Promise<void>;
    if (fault === "kill") {
      await r.kill();
      restore = () => r.restart();
    } else if (fault === "misconf") {
      // A snapshot that cannot be renamed into place (a directory has its name) fails, and Redis
      // then refuses every write (stop-writes-on-bgsave-error) until a snapshot succeeds.
      await admin.connect();
      mkdirSync(join(r.dir, "dump.rdb"));
      await admin.config("SET", "save", "3600 1");
      await admin.bgsave();
      await until("failed snapshot", async () => (await admin.info("persistence")).includes("rdb_last_bgsave_status:err"), 10_000);
      restore = async () => {
        rmSync(join(r.dir, "dump.rdb"), { recursive: true });
        await admin.bgsave();
        await until("snapshot", async () => (await admin.info("persistence")).includes("rdb_last_bgsave_status:ok"), 10_000);
        await admin.config("SET", "save", "");
      };
    } else if (fault === "readonly") {
      // Demoted to a replica (of a primary that never answers): it keeps its data and refuses writes.
      await admin.connect();
      await admin.call("REPLICAOF", "127.0.0.1", String(await freePort()));
      restore = async () => {
        await admin.call("REPLICAOF", "NO", "ONE");
      };
    } else {
      await admin.connect();
      await admin.config("SET", "maxmemory-policy", "noeviction");
      await admin.config("SET", "maxmemory", "1");
      restore = async () => {
        await admin.config("SET", "maxmemory", "0");
      };
    }

    // The gateway: a 503 with Retry-After and a reason, fast; never a 500. A read still works
    // while Redis only refuses writes.
    await gatewayRefuses(s, fault);

    // The jobs end in the batch system meanwhile; the JEM must wait, not die or fail them.
    await quietPeriod(4_000, "the outage lasts while the jobs end in the batch system");
    await restore();
    admin.disconnect();

    await until("gateway serving", async () => (await list(s)).status === 200, 20_000, s.logs);
    // Promptly: well within the JEM's 30 s leases, so no job waited for a lease to expire.
    const final = await until(
      "all jobs FINISHED",
      async () => {
        const st = await states(s, ids);
        return st?.every((x) => x === "FINISHED" || x === "FAILED" || x === "KILLED") ? st : undefined;
      },
      20_000,
      s.logs,
    );
    expect(final, s.logs().slice(-4000)).toEqual(ids.map(() => "FINISHED"));
    // Exactly once: each name once in the shared file, the refused submission never.
    const ran = readFileSync(runs, "utf8").trim().split("\n").sort();
    expect(ran).toEqual([...names].sort());

    // One episode per process: one line when it started, one when it ended — not one per job.
    expect(lines(s, "jem", "redis unavailable since"), s.logs().slice(-4000)).toHaveLength(1);
    expect(lines(s, "jem", "redis back after")).toHaveLength(1);
    expect(lines(s, "gateway", "redis unavailable since")).toHaveLength(1);
    expect(lines(s, "gateway", '"level":50')).toEqual([]);
    expect(lines(s, "jem", '"level":50')).toEqual([]);
  }

  it("a restart from the AOF keeps what the CE users wrote in scripts and transactions (the ACL lets 'default' replay them)", async () => {
    redis = await startRedis({ aof: true });
    const c = new Redis(redis.url.replace(/\/\/[^@]*@/, `//${redis.users.jem.username}:${redis.users.jem.password}@`));
    await c.eval(
      "redis.call('hset', KEYS[1], 'state', 'ACCEPTED'); redis.call('sadd', KEYS[2], 'j1')",
      2,
      "{aof}:job:j1",
      "{aof}:i:ACCEPTED",
    );
    await c.multi().set("{aof}:a", "1").set("{aof}:b", "2").exec();
    c.disconnect();
    await redis.kill();
    await redis.restart();
    const d = new Redis(redis.adminUrl);
    expect(await d.hget("{aof}:job:j1", "state")).toBe("ACCEPTED");
    expect(await d.smembers("{aof}:i:ACCEPTED")).toEqual(["j1"]);
    expect(await d.mget("{aof}:a", "{aof}:b")).toEqual(["1", "2"]);
    d.disconnect();
  });
  it("redis-server killed with jobs in flight and restarted from its AOF", () => outageRun("kill"), 90_000);
  it("redis refusing writes after a failed snapshot (MISCONF)", () => outageRun("misconf"), 90_000);
  it("redis out of memory (maxmemory, noeviction)", () => outageRun("oom"), 90_000);
  it("redis demoted to a read-only replica (READONLY)", () => outageRun("readonly"), 90_000);
});
