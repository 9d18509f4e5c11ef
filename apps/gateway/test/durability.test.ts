import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

/**
 * `redis.waitReplicas` refusing a write after its handler already built the 201: the test Redis
 * has no replica, so every WAIT confirms 0 and the durability check turns the 201 into a 503.
 * That 503 once went out with the 201's headers, Content-Length included (Hono's `c.res` setter
 * copies them): the client of a Sentinel failover waited for bytes never sent. Checked on the
 * wire, on one keep-alive connection, so a wrong length shows as a hang or a garbled next answer.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), { redis: { waitReplicas: 1, waitTimeoutMs: 50 } });
});
afterAll(async () => t?.close());

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
        if (left <= 0 || sock.destroyed) throw new Error(`no complete answer within ${timeoutMs} ms (have ${buf.length} bytes: ${buf.toString("latin1").slice(0, 300)})`);
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
        expect(JSON.parse(r.body.toString("utf8"))).toMatchObject({ "status-code": "503", reason: expect.stringMatching(/not confirmed by 1 replica/) });
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
