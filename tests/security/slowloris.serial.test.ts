/**
 * Slowloris and connection hogging against the real gateway (TLS, loopback): a request head or
 * body that trickles in is cut after its timeout, a silent connection is closed, more than
 * `gateway.connections.maxPerAddress` connections from one address are refused, and the gateway
 * keeps answering everyone else throughout.
 */
import { request as httpsRequest } from "node:https";
import { connect as netConnect } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createPki, startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { waitFor } from "@ce/testing";

const MAX_PER_ADDRESS = 6;
let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    gateway: {
      connections: {
        headersTimeoutSeconds: 1,
        requestTimeoutSeconds: 2,
        idleTimeoutSeconds: 2,
        keepAliveTimeoutSeconds: 1,
        maxPerAddress: MAX_PER_ADDRESS,
      },
    },
  });
});
afterAll(async () => {
  await t?.close();
});

/** A TLS connection as alice from `localAddress` (127.0.0.x are all loopback on Linux). */
function open(localAddress = "127.0.0.1"): Promise<TLSSocket> {
  const c = createPki().creds.alice!;
  return new Promise((resolve, reject) => {
    const tcp = netConnect({ host: "127.0.0.1", port: t.gw.port, localAddress });
    const s = tlsConnect({ socket: tcp, servername: "localhost", rejectUnauthorized: false, cert: c.cert, key: c.key }, () => resolve(s));
    s.once("error", reject);
    s.once("close", () => reject(new Error("closed before the handshake finished")));
  });
}

/** Resolves with what the server sent and how long the connection lived once it is closed. */
function untilClosed(s: TLSSocket): Promise<{ text: string; ms: number }> {
  const t0 = Date.now();
  let text = "";
  s.on("data", (d: Buffer) => (text += d.toString("latin1")));
  s.on("error", () => undefined);
  return new Promise((resolve) => s.once("close", () => resolve({ text, ms: Date.now() - t0 })));
}

/** A normal request from `localAddress` on a fresh connection. */
function get(path: string, localAddress = "127.0.0.1"): Promise<number> {
  const c = createPki().creds.alice!;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: t.gw.port,
        path,
        localAddress,
        agent: false,
        rejectUnauthorized: false,
        cert: c.cert,
        key: c.key,
        headers: { accept: "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Writes `text` one character every `everyMs` until the socket closes. */
function trickle(s: TLSSocket, text: string, everyMs: number): void {
  let i = 0;
  const timer = setInterval(() => {
    if (s.destroyed || i >= text.length) return clearInterval(timer);
    s.write(text[i++]!);
  }, everyMs);
  s.once("close", () => clearInterval(timer));
}

const INFO = () => `${t.rest}/1.1/info`;
const slowHead = () => `GET ${INFO()} HTTP/1.1\r\nHost: localhost\r\n${"X-Slow: " + "a".repeat(200)}\r\n\r\n`;

describe("slow clients are cut off", () => {
  it("a request head trickling in is answered 408 and closed after headersTimeout", async () => {
    const s = await open();
    const closed = untilClosed(s);
    trickle(s, slowHead(), 100); // would take 20 s
    const { text, ms } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(ms).toBeLessThan(4_000);
  });

  it("a body trickling in is cut after requestTimeout", async () => {
    const s = await open();
    const closed = untilClosed(s);
    const body = "&(executable=/bin/true)".padEnd(400, " ");
    s.write(
      `POST ${t.rest}/1.1/jobs?action=new HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/rsl\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    trickle(s, body, 100); // would take 40 s; each byte keeps the socket from being idle
    const { text, ms } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(ms).toBeGreaterThanOrEqual(1_500);
    expect(ms).toBeLessThan(5_000);
  });

  it("a silent connection is closed", async () => {
    const s = await open();
    const { text, ms } = await untilClosed(s);
    expect(text === "" || /^HTTP\/1\.1 408/.test(text)).toBe(true);
    expect(ms).toBeLessThan(4_000);
  });
});

describe("connections per client address", () => {
  it(`holds at most ${MAX_PER_ADDRESS} from one address, refuses the next, serves other addresses meanwhile`, async () => {
    const held = await Promise.all(Array.from({ length: MAX_PER_ADDRESS }, () => open("127.0.0.3")));
    try {
      await expect(open("127.0.0.3")).rejects.toThrow();
      expect(await get(INFO(), "127.0.0.4")).toBe(200);
      expect(await get(INFO(), "127.0.0.1")).toBe(200);
    } finally {
      for (const s of held) s.destroy();
    }
    // Freed slots are usable again (the server sees the closes asynchronously).
    await waitFor("a freed slot", async () => (await get(INFO(), "127.0.0.3").catch(() => 0)) === 200, 5_000, { everyMs: 50 });
  });

  it("many slow clients at once do not stop the gateway from answering a normal request promptly", async () => {
    const slow = await Promise.all(Array.from({ length: MAX_PER_ADDRESS }, () => open("127.0.0.5")));
    const done = slow.map((s) => {
      const c = untilClosed(s);
      trickle(s, slowHead(), 200);
      return c;
    });
    const t0 = Date.now();
    expect(await get(INFO(), "127.0.0.6")).toBe(200);
    expect(Date.now() - t0).toBeLessThan(1_000);
    for (const r of await Promise.all(done)) expect(r.text).toMatch(/^HTTP\/1\.1 408/);
  });
});
