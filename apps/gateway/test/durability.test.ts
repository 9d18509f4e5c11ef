import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { Redis } from "ioredis";
import { AdvanceSet, JobStore, Keys } from "@ce/store";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";
import { quietPeriod, waitFor } from "@ce/testing";

/**
 * `redis.waitReplicas` refusing a write after its handler already built the 201: the test Redis
 * has no replica, so every WAIT confirms 0 and the durability check turns the 201 into a 503.
 * That 503 once went out with the 201's headers, Content-Length included (Hono's `c.res` setter
 * copies them): the client of a Sentinel failover waited for bytes never sent. Checked on the
 * wire, on one keep-alive connection, so a wrong length shows as a hang or a garbled next answer.
 */
let t: TestGateway;
let redis: Redis;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), { redis: { waitReplicas: 1, waitTimeoutMs: 50 } });
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  redis?.disconnect();
  await t?.close();
});

/** Every job record under a gateway's prefix. */
async function jobsOf(prefix: string) {
  const ids = await redis.zrange(new Keys(prefix).all(), 0, -1);
  return (await new JobStore(redis, prefix).getMany(ids)).filter((j) => j !== undefined);
}

interface Answer {
  status: number;
  headers: Map<string, string>;
  body: Buffer;
}

/** One HTTP/1.1 connection: each `exchange` writes a request and reads exactly one answer (by its Content-Length). */
function keepAliveConnection(port: number, cred: { cert: string; key: string }) {
  const sock: TLSSocket = tlsConnect({ host: "127.0.0.1", port, rejectUnauthorized: false, cert: cred.cert, key: cred.key });
  let buf = Buffer.alloc(0);
  let waiter: (() => void) | undefined;
  sock.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    waiter?.();
  });
  sock.on("error", () => waiter?.());
  const more = () => new Promise<void>((resolve) => (waiter = resolve));
  return {
    async exchange(request: string, timeoutMs = 5_000): Promise<Answer> {
      sock.write(request);
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end >= 0) {
          const [statusLine = "", ...lines] = buf.subarray(0, end).toString("latin1").split("\r\n");
          const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
          const len = Number(headers.get("content-length"));
          if (!Number.isInteger(len)) throw new Error(`answer without a Content-Length: ${statusLine}`);
          if (buf.length - end - 4 >= len) {
            const body = buf.subarray(end + 4, end + 4 + len);
            buf = buf.subarray(end + 4 + len);
            return { status: Number(statusLine.split(" ")[1]), headers, body };
          }
        }
        const left = deadline - Date.now();
        if (left <= 0 || sock.destroyed)
          throw new Error(`no complete answer within ${timeoutMs} ms (have ${buf.length} bytes: ${buf.toString("latin1").slice(0, 300)})`);
        await Promise.race([more(), new Promise((r) => setTimeout(r, left))]);
      }
    },
    close: () => sock.destroy(),
  };
}

describe("durability check (redis.waitReplicas) refusing a 201", () => {
  it("answers a complete 503 whose Content-Length is its own, and the connection stays usable", async () => {
    const cred = t.pki.creds.alice!;
    const conn = keepAliveConnection(t.gw.port, cred);
    try {
      const body = XRSL("not-replicated");
      const submit = `POST ${t.rest}/1.0/jobs?action=new HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\nContent-Type: application/rsl\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      for (let i = 0; i < 2; i++) {
        const r = await conn.exchange(submit);
        expect(r.status).toBe(503);
        expect(Number(r.headers.get("content-length"))).toBe(r.body.length);
        expect(r.headers.get("retry-after")).toBeDefined();
        expect(r.headers.get("x-error-code")).toBe("NOT_REPLICATED");
        expect(r.headers.get("content-type")).toMatch(/json/);
        expect(JSON.parse(r.body.toString("utf8"))).toMatchObject({
          "status-code": "503",
          reason: expect.stringMatching(/not confirmed by 1 replica/),
        });
      }
      // Only an answered 201 runs: the two refused submissions' jobs exist (written before the
      // check) but were withdrawn before the 503 left, and are due now for the JEM to fail them.
      const jobs = await jobsOf(t.prefix);
      expect(jobs).toHaveLength(2);
      const keys = new Keys(t.prefix);
      expect(await redis.zcard(keys.holds())).toBe(0);
      const adv = new AdvanceSet(redis, t.prefix);
      for (const j of jobs) {
        expect(j.hold).toMatch(/^[0-9a-f-]{36}$/);
        expect((await adv.scoreOf(j.id)).due).toBeLessThanOrEqual(Date.now());
      }
      // A read is not a write: the same connection answers it normally after the refusals.
      const info = await conn.exchange(`GET ${t.rest}/1.0/jobs HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\r\n`);
      expect(info.status).toBe(200);
      expect(Number(info.headers.get("content-length"))).toBe(info.body.length);
    } finally {
      conn.close();
    }
  });
});

describe("submission holds without replicas", () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway(inject("redisUrl"), { jobs: { submissionHoldSeconds: 30 } });
  });
  afterAll(async () => g?.close());

  it("a 201 releases its jobs once written (one hold per request, gone after the answer)", async () => {
    const r = await g.request("POST", `${g.rest}/1.0/jobs?action=new`, {
      body: `+(${XRSL("a")})(${XRSL("b")})`,
      headers: { "content-type": "application/rsl" },
      accept: "application/json",
    });
    expect(r.status).toBe(201);
    const jobs = await waitFor(
      "both jobs released",
      async () => {
        const jobs = await jobsOf(g.prefix);
        return jobs.some((j) => j.hold) ? undefined : jobs;
      },
      5_000,
      { everyMs: 20 },
    );
    expect(jobs).toHaveLength(2);
    expect(jobs.map((j) => j.hold)).toEqual([undefined, undefined]);
    expect(await redis.zcard(new Keys(g.prefix).holds())).toBe(0);
  });

  it("a client gone before the answer was written: the jobs are withdrawn, never released", async () => {
    const body = `+${Array.from({ length: 100 }, (_, i) => `(${XRSL(`gone${i}`)})`).join("")}`;
    const cred = g.pki.creds.alice!;
    const sock = tlsConnect({ host: "127.0.0.1", port: g.gw.port, rejectUnauthorized: false, cert: cred.cert, key: cred.key });
    await new Promise<void>((r) => sock.once("secureConnect", () => r()));
    sock.write(
      `POST ${g.rest}/1.0/jobs?action=new HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\nContent-Type: application/rsl\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // Gone once the request is in, while the 100 jobs are still being created.
    await quietPeriod(20, "the client leaves once the request is in, while the 100 jobs are being created");
    sock.destroy();
    const keys = new Keys(g.prefix);
    const jobs = await waitFor(
      "100 jobs created and no hold left",
      async () => {
        const jobs = await jobsOf(g.prefix);
        const all = jobs.filter((j) => j.jobName?.startsWith("gone")).length === 100;
        return all && (await redis.zcard(keys.holds())) === 0 ? jobs : undefined;
      },
      10_000,
      { everyMs: 20 },
    );
    const gone = jobs.filter((j) => j.jobName?.startsWith("gone"));
    expect(gone).toHaveLength(100);
    expect(await redis.zcard(keys.holds())).toBe(0);
    // Still carrying the hold: withdrawn (a release removes it), so the JEM fails them unrun.
    expect(gone.every((j) => typeof j.hold === "string")).toBe(true);
  });
});
